"""The staged install's probe: run its worker's check, and judge the report (SPEC §8, step 6).

The verdict and ``--untested`` (documented in docs/install.md): a tested plan publishes only when
the worker's check says ``available: true``. An untested plan (another ABI number, or an
unnumbered release off our line) is published only when the check refuses the library *by its
ABI* — by number, stating the number the release stated, or as unnumbered off the line — and for
no other reason (a missing symbol, a library that does not load, the wrong size): ``--untested``
relaxes the version rule, never the library's integrity. Its receipt records ``tested: false`` and
the number the library states.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from superfluid.installer.plans import Plan, backend_family
from superfluid.runtime.errors import SuperfluidError, WorkerFailed

__all__ = ["PROBE_TIMEOUT", "ProbeRefused", "Probed", "judge_probe", "probe"]

#: seconds the staged worker's check may take before it is killed
PROBE_TIMEOUT = 60.0


class ProbeRefused(SuperfluidError):
    """The staged install's check refused it; nothing of it was published."""

    def __init__(self, plan: Plan, reason: str, *, fix: str | None = None) -> None:
        super().__init__(f"{plan.id} {plan.install}: {reason}", fix=fix)
        self.plan = plan
        self.reason = reason


@dataclass(frozen=True)
class Probed:
    """What the staged worker's check found, as the receipt records it."""

    tested: bool
    abi: int | None
    version: str | None  # the first word of the check's runtime version ("0.4.0")
    devices: tuple[Mapping[str, Any], ...] = ()


def _stated(report: Mapping[str, Any]) -> tuple[bool, int | None] | None:
    """Whether a refusing check refused by ABI alone: ``(True, N)`` by number, ``(True, None)``
    unnumbered off the line (the report's ``stated``); None for any other refusal (symbols, size,
    not loadable)."""
    stated = report.get("stated")
    if isinstance(stated, Mapping) and "abi" in stated:
        abi = stated.get("abi")
        return True, abi if isinstance(abi, int) else None
    return None


def judge_probe(p: Plan, report: Mapping[str, Any], *, untested: bool) -> Probed:
    """The verdict on a staged install from its worker's check report (see the module doc).

    - ``available: true``: published; ``tested`` unless the plan was chosen untested; the version
      the library states must be the plan's (else the bundle is not what its release says), except
      for a ``--from`` archive of no known version;
    - refused by ABI alone, for a plan chosen ``untested`` (or ``--from`` with ``--untested``),
      stating the number the release stated: published with ``tested: false``;
    - anything else: refused (``ProbeRefused``), naming the check's reason.

    Raises:
        ProbeRefused: the staged library is not published.
    """
    available = report.get("available")
    runtime = report.get("runtime") if isinstance(report.get("runtime"), Mapping) else {}
    version_text = runtime.get("version") if isinstance(runtime, Mapping) else None
    version = version_text.split()[0] if isinstance(version_text, str) and version_text.split() else None
    abi = report.get("abi") if isinstance(report.get("abi"), int) else None
    devices = tuple(d for d in report.get("devices") or () if isinstance(d, Mapping))
    if available is True:
        if p.id == "basert" and p.version != "custom" and version is not None and version != p.version:
            raise ProbeRefused(p, f"the bundle of baseRT {p.version} holds libbaseRT {version}: the release "
                                  "is not what it says", fix="nothing was installed; report it to its publisher")
        return Probed(p.chosen_by != "untested", abi, version, devices)
    reason = available if isinstance(available, str) else "its check said nothing about availability"
    by_abi = _stated(report)
    may = p.chosen_by == "untested" or (p.chosen_by == "from" and untested)
    if may and by_abi is not None:
        _, stated = by_abi
        if p.chosen_by == "untested" and stated != p.abi:
            raise ProbeRefused(p, f"its library states ABI {stated}, and the release states {p.abi}: {reason}")
        return Probed(False, stated, p.version if p.version != "custom" else None, devices)
    fix = None
    if by_abi is not None and p.chosen_by == "from":
        fix = "--untested installs it anyway (recorded as untested)"
    raise ProbeRefused(p, f"the staged library was refused by its check: {reason}", fix=fix)


def _device_fits(p: Plan, probed: Probed) -> str | None:
    """A GPU build must find a device of its backend family; a CPU build any (SPEC §3.5 step 6)."""
    if p.id == "basert" or p.backend == "cpu":
        return None
    family = backend_family(p.backend).lower()
    seen = [str(d.get("backend", "?")) for d in probed.devices]
    if any(s.lower() == family for s in seen):
        return None
    return f"its check finds no {p.backend} device here (it sees: {', '.join(seen) or 'none'})"


def probe(p: Plan, staging: Path, *, environ: Mapping[str, str], untested: bool) -> Probed:
    """Run the staged worker's check in a subprocess (scrubbed environment, stdin closed, timeout).

    Raises:
        ProbeRefused: the check refused the staged library, or it found no device of its backend.
    """
    from superfluid.runtime.process import run_json
    from superfluid.runtime.receipt import worker_path

    worker = staging / worker_path(p.id)
    argv = [str(worker), "check"]
    if p.id == "basert":
        argv += ["--basert-lib", str(staging / "lib")]
    env = {k: v for k, v in environ.items()
           if not k.startswith("SUPERFLUID_WORKER_") and k not in ("BASERT_LIB", "SUPERFLUID_LLAMA_LIB")}
    try:
        report, _ = run_json(argv, environ=env, timeout=PROBE_TIMEOUT, accept=(0, 1))
    except WorkerFailed as e:
        raise ProbeRefused(p, f"its check failed: {e.reason}") from None
    if not isinstance(report, Mapping):
        raise ProbeRefused(p, "its check answered with something other than a report")
    probed = judge_probe(p, report, untested=untested)
    why = _device_fits(p, probed)
    if why:
        raise ProbeRefused(p, why)
    return probed
