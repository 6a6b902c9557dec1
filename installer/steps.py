"""One plan's steps inside the runtime's lock: stage, probe, and the receipt made of the verdict.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from superfluid.runtime.probe import ProbeRefused

if TYPE_CHECKING:
    from superfluid.installer.fill import Fill, Verified
    from superfluid.installer.phases import Phases
    from superfluid.runtime.adapter import Adapter
    from superfluid.runtime.planning import Plan
    from superfluid.runtime.probe import Probed
    from superfluid.runtime.receipt import Receipt

__all__ = ["PROBE_TIMEOUT", "PlanSteps", "probe_staged", "probe_environ"]

#: seconds the staged worker's check may take before it is killed
PROBE_TIMEOUT = 60.0


class PlanSteps:
    """The stage and probe of plan ``p``: ``stage`` fills the staging with ``fill``, ``probe`` judges
    it and answers its receipt; ``probed`` is when that receipt was made (``time.monotonic()``, 0
    before: the ``publish`` phase starts there)."""

    def __init__(self, adapter: Adapter, p: Plan, fill: Fill, *, environ: Mapping[str, str], untested: bool,
                 platform: str, lock: Mapping[str, str] | None = None, phases: Phases | None = None) -> None:
        self.adapter, self.plan, self.fill, self.environ, self.untested = adapter, p, fill, environ, untested
        self.platform, self.lock, self.phases = platform, lock, phases
        self.fetched: Sequence[Verified] = ()
        self.probed = 0.0

    def stage(self, staging: Path) -> None:
        """Fill ``staging/lib`` with the plan's verified archives."""
        from superfluid.runtime.home import LIB

        self.fetched = self.fill(staging / LIB)

    def probe(self, staging: Path) -> Receipt:
        """The receipt of the staged install, made of the probe's verdict on it.

        Raises:
            ProbeRefused: as ``probe_staged``.
        """
        from superfluid.installer.phases import phase
        from superfluid.runtime.receipt import Source, receipt_for

        with phase(self.phases, "probe"):
            probed = probe_staged(self.adapter, self.plan, staging, environ=self.environ, untested=self.untested)
        receipt = receipt_for(self.plan, [Source(a.url, sha) for a, _, sha in self.fetched], probed, self.platform,
                              lock=self.lock)
        self.probed = time.monotonic()
        return receipt


def probe_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without any worker override (``registry.env_override``): the staged worker's
    check is the staged install's own, never a worker the user named for another command."""
    from superfluid.runtime import registry

    overrides = {registry.env_override(runtime_id) for runtime_id in registry.IDS}
    return {k: v for k, v in environ.items() if k not in overrides}


def probe_staged(adapter: Adapter, p: Plan, staging: Path, *, environ: Mapping[str, str], untested: bool) -> Probed:
    """Run the staged worker's check in a subprocess (``probe_environ``, stdin closed, a timeout)
    and judge its report (``Adapter.judge_probe``).

    Raises:
        ProbeRefused: the check refused the staged library, or the verdict did.
    """
    from superfluid.runtime.errors import WorkerFailed
    from superfluid.runtime.home import LIB, worker_path
    from superfluid.runtime.process import run_json

    argv = [str(staging / worker_path(p.id)), *adapter.probe_argv(str(staging / LIB))]
    try:
        report, _ = run_json(argv, environ=probe_environ(environ), timeout=PROBE_TIMEOUT, accept=(0, 1))
    except WorkerFailed as e:
        raise ProbeRefused(p, f"its check failed: {e.reason}") from None
    if not isinstance(report, Mapping):
        raise ProbeRefused(p, "its check answered with something other than a report")
    return adapter.judge_probe(p, report, untested=untested)
