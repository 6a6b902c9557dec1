"""The verdict on a staged install: is the library its worker's ``check`` found the one the plan names?"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.fixes import Fix, FixLike
from superfluid.runtime.kernel.layout import install_receipt, worker_path
from superfluid.runtime.kernel.ordering import backend_family
from superfluid.runtime.kernel.receipt import LINK_W, Receipt, Source, now_utc, read_receipt
from superfluid.runtime.kernel.redact import redact_url
from superfluid.runtime.planning import Plan

__all__ = ["ProbeRefused", "Probed", "judge_probe", "missing_cuda_runtime", "cpu_fallback", "install_cpu_fallback",
           "receipt_for"]

#: the loader's words for a CUDA runtime it does not find (``libcudart.so.12: cannot open shared object file``),
#: or the needs' (``needs libcudart.so.12, which is on none of this host's library paths``)
_NO_CUDART = re.compile(r"(libcudart\.so\.\d+)(?:: cannot open shared object file|, which is on none of)")


#: the advice of a staged library that is not the release it says (another ABI than the release states)
_NOT_THE_RELEASE = "nothing was installed: the bundle is not the release it says"


def missing_cuda_runtime(reason: str) -> str | None:
    """The CUDA runtime library (``libcudart.so.12``) a refusal says the loader did not find, or None."""
    m = _NO_CUDART.search(reason)
    return m.group(1) if m else None


class ProbeRefused(SuperfluidError):
    """The staged install's check refused it; nothing of it is published."""

    def __init__(self, plan: Plan, reason: str, *, fix: FixLike = None, advice: str | None = None) -> None:
        super().__init__(f"{plan.id} {plan.install}: {reason}", fix=fix, advice=advice)
        self.plan = plan
        self.reason = reason
        #: the CUDA runtime library its GPU module did not find (``missing_cuda_runtime``), or None
        self.missing_runtime = missing_cuda_runtime(reason)


@dataclass(frozen=True, slots=True)
class Probed:
    """What the staged worker's check found, as the receipt records it."""

    tested: bool
    abi: int | None
    version: str | None  # the first word of the check's runtime version ("0.4.0")
    devices: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # the report's facts the receipt keeps


def _by_abi(report: Mapping[str, Any]) -> tuple[int | None] | None:
    """``(N,)`` when a refusing check refused by ABI alone (``N`` the number stated, None when
    unnumbered off the line: the report's ``stated``); None for any other refusal."""
    stated = report.get("stated")
    if isinstance(stated, Mapping) and "abi" in stated:
        abi = stated.get("abi")
        return (abi if isinstance(abi, int) else None,)
    return None


def _device_fits(backend: str, devices: Sequence[Mapping[str, Any]], unloaded: object = None) -> str | None:
    """A GPU build must find a device of its backend family; a CPU build any. ``unloaded``: the
    report's GPU modules that registered no device, and why (the loader's words), said with it."""
    if backend == "cpu":
        return None
    family = backend_family(backend).lower()
    seen = [str(d.get("backend", "?")) for d in devices]
    if any(s.lower() == family for s in seen):
        return None
    said = unloaded if isinstance(unloaded, Mapping) else {}
    why = "".join(f"; {name} does not load: {words}" for name, words in sorted(said.items()) if isinstance(words, str))
    return f"its check finds no {backend} device here (it sees: {', '.join(seen) or 'none'}){why}"


def cpu_fallback(install: str, backend: str, report: Mapping[str, Any]) -> str | None:
    """Why ``install``, a GPU build (``backend`` not ``cpu``), would serve on the CPU: its check
    (``report``) loads the library and lists devices, none of the build's family (with the GPU
    modules that did not load and the loader's words); None when it finds one, or for a CPU build."""
    devices = report.get("devices")
    if backend_family(backend) == "cpu" or backend == "unknown" or not isinstance(devices, list):
        return None
    why = _device_fits(backend, [d for d in devices if isinstance(d, Mapping)], report.get("unloaded"))
    return None if why is None else f"{install} is a {backend} build, and {why}: it serves on the CPU"


def install_cpu_fallback(install: str | os.PathLike[str], report: Mapping[str, Any]) -> str | None:
    """``cpu_fallback`` of the install at ``install`` (its build and backend as its receipt records
    them) on its check's ``report``; None when its receipt does not read."""
    try:
        receipt = read_receipt(install_receipt(install))
    except BadFile:
        return None
    return cpu_fallback(receipt.install, receipt.backend, report)


def _hold_to_plan(p: Plan, report: Mapping[str, Any], version: str | None, holds_version: bool) -> None:
    if holds_version and p.version != "custom" and version is not None and version != p.version:
        raise ProbeRefused(p, f"the bundle of {p.id} {p.version} holds a library of version {version}: the release "
                              "is not what it says", advice="nothing was installed; report it to its publisher")
    for key, want in p.facts.items():
        got = report.get(key)
        if got is not None and got != want:
            raise ProbeRefused(p, f"its library is laid out as {got}, but {p.id} {p.version} was tested as {want}"
                               if key == "layout" else f"its check reports {key} {got!r}, and the plan says {want!r}",
                               advice="nothing was installed: the archives are not the build the plan names")


def judge_probe(p: Plan, report: Mapping[str, Any], *, untested: bool, holds_version: bool = False,
                needs_device: bool = True, keeps: Sequence[str] = ()) -> Probed:
    """The verdict on a staged install from its worker's check report (see the module doc).

    ``holds_version``: the library must state the plan's version (unless ``custom``).
    ``needs_device``: a build of another backend than ``cpu`` must see a device of its family.
    ``keeps``: the report's keys the receipt records.

    Raises:
        ProbeRefused: the staged library is not published.
    """
    available = report.get("available")
    runtime = report.get("runtime") if isinstance(report.get("runtime"), Mapping) else {}
    version_text = runtime.get("version") if isinstance(runtime, Mapping) else None
    version = version_text.split()[0] if isinstance(version_text, str) and version_text.split() else None
    abi = report.get("abi") if isinstance(report.get("abi"), int) else None
    devices = tuple(d for d in report.get("devices") or () if isinstance(d, Mapping))
    extra = {k: report.get(k) for k in keeps}
    if available is True:
        _hold_to_plan(p, report, version, holds_version)
        if p.abi is not None and abi is not None and abi != p.abi:
            raise ProbeRefused(p, f"its library states ABI {abi}, and the release states {p.abi}",
                               advice=_NOT_THE_RELEASE)
        why = _device_fits(p.backend, devices, report.get("unloaded")) if needs_device else None
        if why:
            raise ProbeRefused(p, why)
        return Probed(p.tested, abi, version, devices, extra)
    reason = _staged_words(report) if isinstance(available, str) else "its check said nothing about availability"
    by_abi = _by_abi(report)
    # a plan made for another release (--for) is judged by that release's ABI, which the plan states
    may = p.chosen_by == "untested" or (p.chosen_by == "from" and untested) or p.made_for is not None
    if may and by_abi is not None:
        (stated,) = by_abi
        if (p.chosen_by == "untested" or p.abi is not None) and stated != p.abi:
            raise ProbeRefused(p, f"its library states ABI {stated}, and the release states {p.abi}: {reason}")
        tested = p.tested and p.made_for is not None and stated == p.abi
        return Probed(tested, stated, p.version if p.version != "custom" else None, devices, extra)
    refused = f"the staged library was refused by its check: {reason}"
    if by_abi is not None and p.chosen_by == "from":  # the archive named, of another ABI: untested, it installs
        raise ProbeRefused(p, refused, fix=_from_untested(p))
    # a release's library of another ABI than the release states is not the release it says: --untested
    # would refuse it too (the plan's ABI is held to), so there is no command to give
    raise ProbeRefused(p, refused, advice=_NOT_THE_RELEASE if by_abi is not None else None)


def _staged_words(report: Mapping[str, Any]) -> str:
    """Why the staged library's check refused it, as an installer says it: the refusal's words alone
    (``refused``: not the next steps the check gives its own user, which name its ``--lib`` and the
    command that just failed), the staging folder, gone once the install ends, left out of the path."""
    refused, available, library = report.get("refused"), report.get("available"), report.get("library")
    words = refused if isinstance(refused, str) and refused else str(available)
    if isinstance(library, str) and library:
        words = words.replace(f" at {library}", "").replace(library, os.path.basename(library))
    return words


def _from_untested(p: Plan) -> Fix:
    """The install of a ``--from`` archive the check refused by ABI, untested: the archive and the
    digest the line named, and ``--untested``."""
    asset = p.assets[0]
    digest = ["--sha256", asset.sha256] if asset.sha256 and asset.digest_source == "flag" else []
    return Fix.superfluid("runtime", "install", p.id, "--from", asset.url, *digest, "--untested",
                          does="installs it untested (recorded as untested)")


def receipt_for(plan: Plan, sources: Sequence[Source], probed: Probed, platform: str, *,
                lock: Mapping[str, str] | None = None, mirror: str | None = None) -> Receipt:
    """The receipt of an install of ``plan`` whose staged library ``probed`` found, fetched from
    ``sources``, on ``platform`` (the plan's own when it names one): the one place receipts are made.
    ``lock`` (``{"file", "sha256"}``) names the lock the plan came from (``install --locked``);
    ``mirror`` the root of the mirror its sources were fetched from (``--mirror``)."""
    return Receipt(id=plan.id, install=plan.install, version=plan.version, backend=plan.backend,
                   worker=worker_path(plan.id), link_w=LINK_W, platforms=(plan.platform or platform,),
                   sources=tuple(Source(redact_url(s.url), s.sha256) for s in sources),  # never user:password@
                   tested=probed.tested, abi=probed.abi,
                   chosen_by=plan.chosen_by,  # type: ignore[arg-type]
                   installed_at=now_utc(),
                   extra={**probed.extra, **({"for": dict(plan.made_for)} if plan.made_for else {}),
                          **({"lock": dict(lock)} if lock else {}),
                          **({"mirror": redact_url(mirror)} if mirror else {})})
