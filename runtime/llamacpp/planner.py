"""Which llama.cpp archives install here: recipe + host + request -> ordered plans.

See docs/install.md, "llama.cpp: by the tested builds".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from superfluid.runtime.digests import api_sha256, expected_digest
from superfluid.runtime.from_archive import NameFacts, plan_from
from superfluid.runtime.hostfacts.kernels import (
    InvalidKernels,
    Kernels,
    cuda_refusal,
    cudart_serves,
    rocm_refusal,
    upstream_cuda_kernels,
)
from superfluid.runtime.hostfacts.needs import InvalidNeeds, Needs, judge
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.ordering import backend_family
from superfluid.runtime.llamacpp.recipe import Archive, TestedBuild, find_tested, parse_name, tested, tested_record
from superfluid.runtime.planning import (
    Listing,
    ListingNeeded,
    NotInstallable,
    Plan,
    PlanAsset,
    ReleaseLike,
    Request,
    parse_sha256,
    stack_refusal,
)

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host

__all__ = ["CUDA_BY_DRIVER", "cuda_major_for_driver", "recorded_needs", "recorded_kernels", "kernels_of",
           "gpu_refusal", "plan", "plan_build"]

T = TypeVar("T")

RUNTIME_ID = "llamacpp"

#: NVIDIA driver major (at least) -> the newest CUDA major it runs, newest first (CUDA's own table
#: of minimum drivers: 580 for CUDA 13.x, 525 for CUDA 12.x)
CUDA_BY_DRIVER: tuple[tuple[int, int], ...] = ((580, 13), (525, 12))


def cuda_major_for_driver(driver: str | None) -> int | None:
    """The newest CUDA major an NVIDIA driver version runs (``580.95.05`` -> 13), or None.

    >>> cuda_major_for_driver("580.95.05"), cuda_major_for_driver("535.1"), cuda_major_for_driver("470.2")
    (13, 12, None)
    """
    if not driver:
        return None
    m = re.match(r"(\d+)", driver)
    if not m:
        return None
    major = int(m.group(1))
    return next((cuda for least, cuda in CUDA_BY_DRIVER if major >= least), None)


def _cuda_version(backend: str) -> tuple[int, ...]:
    """``cuda-13.4`` -> (13, 4); () for a backend that is not CUDA."""
    if backend_family(backend) != "cuda":
        return ()
    return tuple(int(d) for d in re.findall(r"\d+", backend))


def _rocm_version(backend: str) -> str | None:
    """``rocm-10.0`` -> ``10.0``; None for a backend that is not ROCm or names no version."""
    if backend_family(backend) != "rocm":
        return None
    m = re.search(r"\d+(\.\d+)*", backend)
    return m.group(0) if m else None


def _side(archive: Archive, archives: Sequence[Archive]) -> Archive | None:
    """The CUDA runtime side archive llama.cpp publishes beside ``archive`` (``cudart-llama-...``), or None."""
    return next((a for a in archives if a.cudart and a.backend == archive.backend
                 and a.platform == archive.platform), None)


def _cudart(archive: Archive, archives: Sequence[Archive], host: Host) -> tuple[list[Archive], str]:
    """The CUDA runtime side archive a CUDA plan also fetches, unless the system's runtime serves it
    (``kernels.cudart_serves``: of its major, on the loader's paths, at least its version)."""
    version = _cuda_version(archive.backend)
    if not version:
        return [], ""
    major = version[0]
    why_not = cudart_serves(host, version)
    if why_not is None:
        return [], f"; the system's CUDA {major} runtime serves it"
    side = _side(archive, archives)
    if side is None:
        return [], f"; {why_not}, and llama.cpp publishes none beside it"
    return [side], f"; {why_not}, so its archive too"


def _with_retry(make: Callable[[list[Archive], str], Plan], archive: Archive, side: Sequence[Archive],
                archives: Sequence[Archive], why: str, note: str) -> Plan:
    """The plan of ``archive`` with ``side`` (``note``: ``_cudart``'s), and when it trusts the system's
    CUDA runtime (no side archive) while llama.cpp publishes one, its ``retry``: the same build with
    that archive, which the installer tries next when its GPU module does not load for a missing CUDA
    runtime (the loader's words), before Vulkan or the CPU."""
    p = make([archive, *side], f"{why}{note}")
    spare = _side(archive, archives) if not side and _cuda_version(archive.backend) else None
    if spare is None:
        return p
    major = _cuda_version(archive.backend)[0]
    return replace(p, retry=make([archive, spare], f"{why}; its GPU module did not find the system's CUDA {major} "
                                                   "runtime, so its archive too"))


def _by_backend(want: str, mains: Sequence[Archive], host: Host, version: str) -> Archive:
    """``--backend B``: the archive named by backend or by family (``cuda`` -> the newest CUDA the
    driver runs, else the newest CUDA). One plan, no fallback.

    Raises:
        NotInstallable: the build has no such backend for this platform.
    """
    fits = [a for a in mains if a.backend == want or backend_family(a.backend) == want]
    if not fits:
        have = ", ".join(sorted({a.backend for a in mains}))
        raise NotInstallable(f"llama.cpp {version} has no {want} build for {host.platform} (it has: {have})")
    runs = cuda_major_for_driver(host.nvidia_driver)
    exact = [a for a in fits if a.backend == want]
    runnable = [a for a in fits if _cuda_version(a.backend) and runs is not None
                and _cuda_version(a.backend)[0] <= runs]
    pool = exact or runnable or fits
    return max(pool, key=lambda a: _cuda_version(a.backend))


def _first_running(candidates: Sequence[Archive], why: str, refuse: Callable[[Archive], str | None]
                   ) -> list[tuple[Archive, str]]:
    """``candidates`` (best first) up to the first whose GPU code runs here: those refused before it
    are planned too (refused, so that the reason is shown), the rest are not."""
    out = []
    for archive in candidates:
        out.append((archive, why))
        if refuse(archive) is None:
            break
    return out


def _ordered(mains: Sequence[Archive], host: Host,
             refuse: Callable[[Archive], str | None] = lambda a: None) -> list[tuple[Archive, str]]:
    """Without ``--backend``: the archives to try, in order, each with why it is tried. Of the CUDA
    builds the driver runs (newest first) and of the ROCm builds, each that ``refuse`` refuses is
    followed by the next, up to the first that runs here."""
    by_backend = {a.backend: a for a in mains}
    if host.os == "macos":
        for backend, why in (("metal", "the Metal build"), ("cpu", "the CPU build")):
            if backend in by_backend:
                return [(by_backend[backend], why)]
        return []
    out: list[tuple[Archive, str]] = []
    runs = cuda_major_for_driver(host.nvidia_driver)
    if runs is not None:
        cuda = [a for a in mains if _cuda_version(a.backend) and _cuda_version(a.backend)[0] <= runs]
        if cuda:
            driver_major = re.split(r"\D", host.nvidia_driver or "", maxsplit=1)[0]
            out += _first_running(sorted(cuda, key=lambda a: _cuda_version(a.backend), reverse=True),
                                  f"NVIDIA driver {driver_major} runs CUDA {runs}", refuse)
    if host.rocm:
        rocm = sorted((a for a in mains if backend_family(a.backend) == "rocm"), key=lambda a: a.backend, reverse=True)
        out += _first_running(rocm, "ROCm", refuse)
    if host.vulkan and "vulkan" in by_backend:
        out.append((by_backend["vulkan"], "a Vulkan driver"))
    if "cpu" in by_backend:
        out.append((by_backend["cpu"], "the CPU build"))
    return out


def _recorded(recipe: Mapping[str, Any], version: str, name: str, key: str, read: Callable[[Any], T],
              invalid: type[Exception]) -> T | None:
    """The recipe's ``key`` record of archive ``name`` of build ``version``, read by ``read``; None
    when it records nothing there.

    Raises:
        BadFile: ``read`` refused the record with ``invalid`` (the recipe is this superfluid's own: a bug).
    """
    recorded = tested_record(recipe, version, name, key)
    if recorded is None:
        return None
    try:
        return read(recorded)
    except invalid as e:
        raise BadFile("the llama.cpp recipe", str(e), json_path=f"$.tested[{version}].{name}") from None


def recorded_needs(recipe: Mapping[str, Any], version: str, name: str) -> Needs | None:
    """What the recipe records archive ``name`` of build ``version`` needs of a host (its ``needs``),
    or None when it records nothing (the extracted files are then measured before the probe).

    Raises:
        BadFile: the recorded needs are not needs (the recipe is this superfluid's own: a bug).
    """
    return _recorded(recipe, version, name, "needs", Needs.from_json, InvalidNeeds)


def recorded_kernels(recipe: Mapping[str, Any], version: str, name: str) -> Kernels | None:
    """The GPU code the recipe records archive ``name`` of build ``version`` carries (its
    ``kernels``), or None.

    Raises:
        BadFile: the record is not one (the recipe is this superfluid's own: a bug).
    """
    return _recorded(recipe, version, name, "kernels", Kernels.from_json, InvalidKernels)


def kernels_of(recipe: Mapping[str, Any], version: str, archive: Archive) -> Kernels | None:
    """What GPU code ``archive`` carries: the recipe's record, else, for a CUDA build, what
    upstream's release workflow builds every CUDA build with (``kernels.upstream_cuda_kernels``)."""
    recorded = recorded_kernels(recipe, version, archive.name)
    if recorded is not None:
        return recorded
    cuda = _cuda_version(archive.backend)
    return upstream_cuda_kernels(cuda) if cuda else None


def gpu_refusal(recipe: Mapping[str, Any], version: str, archive: Archive, host: Host) -> str | None:
    """Why ``archive``'s GPU code cannot run on ``host``'s GPUs (``kernels.cuda_refusal``,
    ``kernels.rocm_refusal``), or None."""
    cuda = _cuda_version(archive.backend)
    if cuda:
        return cuda_refusal(host, cuda, kernels_of(recipe, version, archive))
    if backend_family(archive.backend) == "rocm":
        return rocm_refusal(host, _rocm_version(archive.backend), kernels_of(recipe, version, archive))
    return None


def _untested_message(version: str, builds: Sequence[TestedBuild]) -> str:
    names = ", ".join(b.version for b in builds)
    return (f"llama.cpp {version} is not a build this adapter was tested with (tested: {names}); its C API "
            f"may differ: pass --untested to install it anyway")


def _listed_archives(release: ReleaseLike) -> tuple[Archive, ...]:
    """An untested build's archives from its release (digests as the listing states them)."""
    out = []
    for a in release.assets:
        parsed = parse_name(a.name)
        if parsed is not None and parsed.build == release.tag:
            out.append(replace(parsed, size=a.size, sha256=api_sha256(a.digest)))
    return tuple(out)


def _plan(request: Request, recipe: Mapping[str, Any], host: Host, build: TestedBuild | None, version: str,
          archives: Sequence[Archive], release: ReleaseLike | None, repo: str, why: str) -> Plan:
    """One plan: ``archives`` (the main one first) at the release's URLs, else the recipe's; each
    asset's digest from the recipe (a tested build) and the listing, ``--sha256`` naming the first.
    An archive the listed release does not publish is ``absent`` (no digest is asked of it): the
    plan is shown, and the installer skips it as not in this release. The main archive's recorded
    needs (``recorded_needs``) are judged here: a plan this host does not meet is ``refused``,
    shown with its reason, and skipped before any of it is fetched."""
    listed = {a.name: a for a in release.assets} if release is not None else {}
    assets = []
    for i, archive in enumerate(archives):
        at = listed.get(archive.name)
        if release is not None and at is None:
            url = str(recipe["release"]).format(version=version, name=archive.name)
            assets.append(PlanAsset(name=archive.name, url=url, sha256=None, size=archive.size, digest_source="absent"))
            continue
        api = api_sha256(at.digest) if at is not None else None
        pin = parse_sha256(archive.sha256) if build is not None and build.archives else None
        # without a listing the release's statements are still to be read: the digest is provisional
        sha, source, checked = expected_digest(archive.name, pin=pin, flag=request.sha256 if i == 0 else None,
                                               api=api, sidecar_pending=release is None, where=(repo, version))
        size = archive.size if archive.size is not None else (at.size if at is not None else None)
        url = at.url if at is not None else str(recipe["release"]).format(version=version, name=archive.name)
        assets.append(PlanAsset(name=archive.name, url=url, sha256=sha, size=size, digest_source=source,
                                checked=checked, api_sha256=api, pin=pin))
    main = archives[0]
    facts = {"layout": build.layout} if build is not None else {}
    needs = recorded_needs(recipe, version, main.name)
    verdict = judge(needs, host, build=main.name) if needs is not None else None
    reasons = [r for r in (stack_refusal(main.backend, host), gpu_refusal(recipe, version, main, host),
                           str(verdict) if verdict is not None and not verdict.ok else None) if r]
    return Plan(id=RUNTIME_ID, version=version, backend=main.backend, assets=tuple(assets), tested=build is not None,
                chosen_by="tested" if build is not None else "untested", abi=None, why=why, platform=main.platform,
                facts=facts, needs=needs, refused="; ".join(reasons) or None)


def plan_build(request: Request, recipe: Mapping[str, Any], host: Host, listing: Listing | None = None,
               *, required: bool = True, builds: Sequence[TestedBuild] | None = None) -> list[Plan]:
    """The ordered plans of one build (``request.version``, else the newest tested) on ``host``.

    ``builds`` are the tested builds (default: the recipe's). A build whose archives the recipe does
    not know (untested, or tested by another release's compat document) is known only from its
    release in the listing. With ``required`` false, a build whose release the listing lacks plans
    nothing (an older build as a fallback).

    Raises:
        NotInstallable: an untested build without ``--untested``, or without a listing; no archive
            of the build for this platform, or of the named backend; nothing of it runs here.
    """
    builds = builds if builds is not None else tested(dict(recipe))
    if not builds:
        raise NotInstallable("no llama.cpp build is tested for this superfluid")
    version = request.version or builds[0].version
    build = find_tested(builds, version)
    if build is None and not request.untested:
        raise NotInstallable(_untested_message(version, builds))
    release = listing.release(version, optional=not required) if listing is not None else None
    if listing is not None and release is None:
        return []
    if build is not None and build.archives:
        archives: Sequence[Archive] = build.archives
    elif release is None:
        raise ListingNeeded(
            f"llama.cpp {version} is not a build this superfluid's recipe carries, so its archives are known only "
            f"from the release listing, and this worker never touches the network",
            fix=Fix.superfluid("runtime", "install", RUNTIME_ID, "--version", version, "--untested",
                               does="plans it from the release listing and installs it"),
            advice="name its archive with --from")
    else:
        archives = _listed_archives(release)
    repo = listing.repo if listing is not None else "llama.cpp"
    mains = [a for a in archives if not a.cudart and a.platform == host.platform]
    if not mains:
        raise NotInstallable(f"llama.cpp {version} publishes no build for {host.platform}")
    describe = host.describe()

    def make(files: list[Archive], why: str) -> Plan:
        return _plan(request, recipe, host, build, version, files, release, repo, why)

    if request.backend:
        chosen = _by_backend(request.backend, mains, host, version)
        side, note = _cudart(chosen, archives, host)
        return [_with_retry(make, chosen, side, archives, f"{describe}: {request.backend}, as named", note)]
    out = []
    for archive, why in _ordered(mains, host, lambda a: gpu_refusal(recipe, version, a, host)):
        side, note = _cudart(archive, archives, host)
        out.append(_with_retry(make, archive, side, archives, f"{describe}: {why}", note))
    if not out:
        raise NotInstallable(f"no llama.cpp {version} build for {describe} runs here "
                             f"(it has: {', '.join(sorted(a.backend for a in mains))})")
    return out


def _read_name(builds: Sequence[TestedBuild], untested: bool) -> Callable[[str, str | None], NameFacts]:
    def read(name: str, version: str | None) -> NameFacts:
        parsed = parse_name(name)
        version = version or (parsed.build if parsed else "custom")
        build = find_tested(builds, version)
        if build is None and not untested:
            raise NotInstallable(_untested_message(version, builds))
        pinned = next((a for a in build.archives if a.name == name), None) if build else None
        return NameFacts(platform=parsed.platform if parsed else None, backend=parsed.backend if parsed else None,
                         version=parsed.build if parsed else None, pin=parse_sha256(pinned.sha256) if pinned else None,
                         size=pinned.size if pinned else None, abi=None,
                         facts={"layout": build.layout} if build else {},
                         tested=build is not None)
    return read


def plan(request: Request, recipe: Mapping[str, Any], host: Host, listing: Listing | None = None, *,
         builds: Sequence[TestedBuild] | None = None) -> list[Plan]:
    """The ordered plans for ``request`` on ``host``.

    Without ``--version`` and ``--from``, the plans of the newest tested build come first (in
    backend order), then those of each older tested build, as later fallbacks: an installer that
    finds the newest build unusable here still installs a tested one. An older build with nothing
    for this host, or whose release the listing lacks, adds no fallback. ``--from`` plans that
    archive (``from_archive.plan_from``); a build not tested needs ``--untested``.

    Raises:
        NotInstallable: as ``plan_build`` for the newest (or named) build; as ``plan_from``.
        DigestConflict, UsageError: as ``plan_from``.
    """
    builds = builds if builds is not None else tested(dict(recipe))
    if request.from_:
        return [plan_from(request, host, _read_name(builds, request.untested), default_backend="cpu")]
    if request.version or not builds:
        return plan_build(request, recipe, host, listing, builds=builds)
    out = plan_build(replace(request, version=builds[0].version), recipe, host, listing, builds=builds)
    for b in builds[1:]:
        try:
            out += plan_build(replace(request, version=b.version), recipe, host, listing, required=False,
                              builds=builds)
        except ListingNeeded:
            if listing is None:  # an older build only its release names: nothing is known of it yet
                raise
        except NotInstallable:
            continue
    return out
