"""One plan's steps inside the runtime's lock: stage, probe, and the receipt made of the verdict.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from superfluid.installer.phases import phase
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.hostfacts.needs import judge, lists_builds, measure, tree_files
from superfluid.runtime.kernel.errors import WorkerFailed
from superfluid.runtime.kernel.layout import LIB, worker_path
from superfluid.runtime.kernel.receipt import Source
from superfluid.runtime.probe import ProbeRefused, receipt_for
from superfluid.runtime.process import answer_json, finish_worker, start_worker, stop_worker, worker_env

if TYPE_CHECKING:
    import subprocess

    from superfluid.installer.home.fill import Fill, Verified
    from superfluid.installer.phases import Phases
    from superfluid.installer.settings import Settings
    from superfluid.runtime.adapter import Adapter
    from superfluid.runtime.hostfacts.host import Host
    from superfluid.runtime.kernel.receipt import Receipt
    from superfluid.runtime.planning import Plan
    from superfluid.runtime.probe import Probed

__all__ = ["PROBE_TIMEOUT", "PlanSteps", "check_staged", "probe_staged", "probe_argv", "probe_environ"]

#: seconds the staged worker's check may take before it is killed
PROBE_TIMEOUT = 60.0


class PlanSteps:
    """The stage and probe of plan ``p``: ``stage`` fills the staging with ``fill``, ``probe`` judges
    it and answers its receipt; ``probed`` is when that receipt was made (``time.monotonic()``, 0
    before: the ``publish`` phase starts there)."""

    def __init__(self, adapter: Adapter, p: Plan, fill: Fill, *, settings: Settings, untested: bool,
                 platform: str, lock: Mapping[str, str] | None = None, mirror: str | None = None,
                 phases: Phases | None = None, kept: Mapping[str, bytes] | None = None,
                 provenance: Mapping[str, Any] | None = None) -> None:
        self.adapter, self.plan, self.fill, self.settings, self.untested = adapter, p, fill, settings, untested
        self.platform, self.lock, self.mirror, self.phases = platform, lock, mirror, phases
        #: files the install keeps besides its archives' (the bundles that proved them, by path below it),
        #: and the receipt's ``provenance`` (``trust.proving.Proofs.to_json``)
        self.kept, self.provenance = dict(kept or {}), provenance
        self.fetched: Sequence[Verified] = ()
        self.probed = 0.0
        self._primed: subprocess.Popen[bytes] | None = None
        self._primed_launcher: tuple[int, int, int] | None = None  # the launcher it was started from

    def stage(self, staging: Path) -> None:
        """Fill ``staging/lib`` with the plan's verified archives; the staged worker that probes them
        is started first, primed (``process.start_worker``): it starts while the archives arrive."""

        argv = probe_argv(self.adapter, self.plan, staging)
        try:
            self._primed_launcher = _identity(argv[0])
            self._primed = start_worker(argv, env=worker_env(probe_environ(self.settings)), primed=True)
        except (OSError, WorkerFailed):
            self._primed = None  # the probe starts it again, and says why it cannot
        try:
            for path, data in self.kept.items():  # before the archives: a staged install holds them when probed
                (staging / path).parent.mkdir(parents=True, exist_ok=True)
                (staging / path).write_bytes(data)
            self.fetched = self.fill(staging / LIB)
        except BaseException:
            if self._primed is not None:
                stop_worker(self._primed)
                self._primed = None
            raise

    def probe(self, staging: Path) -> Receipt:
        """The receipt of the staged install, made of the probe's verdict on it, once its files are
        known to load here (``check_staged``).

        Raises:
            ProbeRefused: as ``check_staged`` and ``probe_staged``.
        """

        primed, self._primed = self._primed, None
        try:
            check_staged(self.plan, staging, detect(self.settings.host_environ))
        except ProbeRefused:
            if primed is not None:
                stop_worker(primed)
            raise
        if primed is not None and not self._still_primed(primed, staging):
            stop_worker(primed)
            primed = None
        with phase(self.phases, "probe"):
            probed = probe_staged(self.adapter, self.plan, staging, settings=self.settings, untested=self.untested,
                                  primed=primed)
        receipt = receipt_for(self.plan, [Source(a.url, sha) for a, _, sha in self.fetched], probed, self.platform,
                              lock=self.lock, mirror=self.mirror)
        if self.provenance is not None:
            receipt = replace(receipt, extra={**receipt.extra, "provenance": dict(self.provenance)})
        self.probed = time.monotonic()
        return receipt

    def _still_primed(self, primed: subprocess.Popen[bytes], staging: Path) -> bool:
        """Whether the primed worker may answer for the staged install: still waiting (one that
        answered already did not wait for the library), from the launcher now staged (a stage may
        put another in its place)."""
        try:
            same = _identity(probe_argv(self.adapter, self.plan, staging)[0]) == self._primed_launcher
        except OSError:
            return False
        return same and primed.poll() is None


def _identity(path: str) -> tuple[int, int, int]:
    """Which file ``path`` is now: its inode, modification time and size."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def check_staged(p: Plan, staging: Path, host: Host) -> None:
    """Before the staged library is loaded: every link in it leads to a file it holds, and what its
    shared objects need (``needs.measure``) this host has (``needs.judge``). A build made for a newer
    distribution, for glibc on a musl host, or naming a library this host lacks is refused naming
    the file, what it needs and what the host has; the installer then tries the next plan.

    Raises:
        ProbeRefused: a link leads nowhere, a shared object is not one the loader could read, or
            the host does not meet the needs.
    """
    lib = staging / LIB
    for e in tree_files(lib):
        if e.is_symlink() and not os.path.exists(e.path):
            shown = Path(e.path).relative_to(staging)
            raise ProbeRefused(p, f"{shown} is a link to {os.readlink(e.path)}, which the archive does not hold",
                               advice="nothing was installed: the archive is incomplete; report it to its publisher")
    try:
        needs = measure(lib)
    except ELFInvalid as e:
        raise ProbeRefused(p, f"a shared object is not one the loader can read: {e}") from None
    verdict = judge(needs, host)
    if not verdict.ok:
        raise ProbeRefused(p, str(verdict), fix=lists_builds(p.id))


def probe_environ(settings: Settings) -> dict[str, str]:
    """The staged worker's environment: the command's (``settings.host_environ``) without any worker
    override (``registry.env_override``): the staged worker's check is the staged install's own,
    never a worker the user named for another command."""

    overrides = {registry.env_override(runtime_id) for runtime_id in registry.IDS}
    return {k: v for k, v in settings.host_environ.items() if k not in overrides}


def probe_argv(adapter: Adapter, p: Plan, staging: Path) -> list[str]:
    """The staged worker's check of the staged library: ``<staging>/bin/superfluid-worker-<id> check ...``."""

    return [str(staging / worker_path(p.id)), *adapter.probe_argv(str(staging / LIB))]


def probe_staged(adapter: Adapter, p: Plan, staging: Path, *, settings: Settings, untested: bool,
                 primed: subprocess.Popen[bytes] | None = None) -> Probed:
    """Run the staged worker's check in a subprocess (``probe_environ``, stdin closed, a timeout)
    and judge its report (``Adapter.judge_probe``). ``primed``: that worker, started primed before the
    library was staged (``PlanSteps.stage``), let go now; else it is started now.

    Raises:
        ProbeRefused: the check refused the staged library, or the verdict did.
    """

    argv = probe_argv(adapter, p, staging)
    try:
        proc = primed if primed is not None else start_worker(argv, env=worker_env(probe_environ(settings)))
        report = answer_json(finish_worker(proc, argv, timeout=PROBE_TIMEOUT), accept=(0, 1))
    except WorkerFailed as e:
        raise ProbeRefused(p, f"its check failed: {e.reason}") from None
    if not isinstance(report, Mapping):
        raise ProbeRefused(p, "its check answered with something other than a report")
    return adapter.judge_probe(p, report, untested=untested)
