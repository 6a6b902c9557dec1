"""Which llama.cpp archives install here: recipe + host + request -> ordered plans (SPEC §4.2).

Pure: no file, no network, no environment. The recipe names the tested builds and their archives;
the host says which backend can run; the request may name a version, a backend, an archive
(``--from``) and allow an untested build (whose archives then come from the release listing the
caller read, with the listing's digests). The plans are an ordered fallback list: the installer
tries them in turn and keeps the first whose staged worker finds its device.

Backend order without ``--backend`` (Linux): CUDA when an NVIDIA driver is present (the newest
CUDA build the driver's major runs, plus the ``cudart-`` side archive when the system has no CUDA
runtime of that major), then ROCm, then Vulkan, then the CPU build. macOS: Metal, else CPU. SYCL
and OpenVINO builds are never chosen unasked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from superfluid.runtime.errors import SuperfluidError
from superfluid.runtime.llamacpp.recipe import Archive, TestedBuild, parse_name, tested
from superfluid.runtime.ordering import backend_family
from superfluid.runtime.plan_request import PlanRequest

__all__ = ["PlanRefused", "RequestLike", "Want", "CUDA_BY_DRIVER", "cuda_major_for_driver", "plan", "plan_build"]

RUNTIME_ID = "llamacpp"

#: NVIDIA driver major (at least) -> the newest CUDA major it runs, newest first (CUDA's own table
#: of minimum drivers: 580 for CUDA 13.x, 525 for CUDA 12.x)
CUDA_BY_DRIVER: tuple[tuple[int, int], ...] = ((580, 13), (525, 12))


class PlanRefused(SuperfluidError):
    """No llama.cpp archive of the request installs here; the message says why."""


class RequestLike(Protocol):
    """What the planner reads of a request (the installer's ``Request`` has these)."""

    @property
    def version(self) -> str | None: ...

    @property
    def backend(self) -> str | None: ...

    @property
    def from_(self) -> str | None: ...

    @property
    def sha256(self) -> str | None: ...

    @property
    def untested(self) -> bool: ...


#: a plain request, for callers without the installer's (``versions``, tests): the worker's own
#: ``runtime.plan_request.PlanRequest``, which has every field ``RequestLike`` reads
Want = PlanRequest


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


def _asset(archive: Archive, url: str) -> dict[str, Any]:
    return {"name": archive.name, "url": url, "sha256": archive.sha256, "size": archive.size}


def _release(version: str, releases: Sequence[Any]) -> Any | None:
    """The listing's release of ``version``, or None."""
    return next((r for r in releases if getattr(r, "tag", None) == version), None)


def _release_archives(version: str, releases: Sequence[Any]) -> tuple[Archive, ...] | None:
    """An untested build's archives from the release listing (digests as the listing states them)."""
    release = _release(version, releases)
    if release is None:
        return None
    out = []
    for a in getattr(release, "assets", ()):
        parsed = parse_name(a.name)
        if parsed is None or parsed.build != version:
            continue
        digest = getattr(a, "digest", None)
        sha = digest[len("sha256:"):] if isinstance(digest, str) and digest.startswith("sha256:") else None
        out.append(replace(parsed, size=getattr(a, "size", None), sha256=sha))
    return tuple(out)


def _urls(version: str, releases: Sequence[Any]) -> dict[str, str]:
    """name -> URL: the listing's download URL when it names one, else the recipe's template."""
    urls: dict[str, str] = {}
    for a in getattr(_release(version, releases), "assets", ()):
        url = getattr(a, "url", None)
        if isinstance(url, str):
            urls[a.name] = url
    return urls


def _url(recipe: Mapping[str, Any], version: str, name: str, urls: Mapping[str, str]) -> str:
    return urls.get(name) or str(recipe["release"]).format(version=version, name=name)


def _plan(version: str, archive: Archive, extra: Sequence[Archive], why: str, *, tested_build: TestedBuild | None,
          recipe: Mapping[str, Any], urls: Mapping[str, str]) -> dict[str, Any]:
    assets = [_asset(a, _url(recipe, version, a.name, urls)) for a in (archive, *extra)]
    out: dict[str, Any] = {"id": RUNTIME_ID, "version": version, "backend": archive.backend,
                           "install": f"{version}-{archive.backend}", "assets": assets,
                           "tested": tested_build is not None, "why": why, "platform": archive.platform,
                           "extra": {}}
    if tested_build is not None:
        out["layout"] = tested_build.layout
    return out


def _cudart(archive: Archive, archives: Sequence[Archive], host: Any) -> tuple[list[Archive], str]:
    """The CUDA runtime side archive a CUDA plan also fetches, when the system has no runtime of its major."""
    version = _cuda_version(archive.backend)
    if not version:
        return [], ""
    major = version[0]
    if getattr(host, "cuda_runtime", None) == major:
        return [], f"; the system's CUDA {major} runtime serves it"
    side = next((a for a in archives if a.cudart and a.backend == archive.backend
                 and a.platform == archive.platform), None)
    if side is None:
        return [], f"; no CUDA {major} runtime on the system, and llama.cpp publishes none beside it"
    return [side], f"; no CUDA {major} runtime on the system, so its archive too"


def _by_backend(want: str, mains: Sequence[Archive], host: Any, version: str) -> Archive:
    """``--backend B``: the archive named by backend or by family (``cuda`` -> the newest CUDA the
    driver runs, else the newest CUDA). One plan, no fallback.

    Raises:
        PlanRefused: the build has no such backend for this platform.
    """
    fits = [a for a in mains if a.backend == want or backend_family(a.backend) == want]
    if not fits:
        have = ", ".join(sorted({a.backend for a in mains}))
        raise PlanRefused(f"llama.cpp {version} has no {want} build for {host.platform} (it has: {have})")
    runs = cuda_major_for_driver(getattr(host, "nvidia_driver", None))
    exact = [a for a in fits if a.backend == want]
    runnable = [a for a in fits if _cuda_version(a.backend) and runs is not None
                and _cuda_version(a.backend)[0] <= runs]
    pool = exact or runnable or fits
    return max(pool, key=lambda a: _cuda_version(a.backend))


def _ordered(mains: Sequence[Archive], host: Any) -> list[tuple[Archive, str]]:
    """Without ``--backend``: the archives to try, in order, each with why it is tried."""
    by_backend = {a.backend: a for a in mains}
    if host.os == "macos":
        for backend, why in (("metal", "the Metal build"), ("cpu", "the CPU build")):
            if backend in by_backend:
                return [(by_backend[backend], why)]
        return []
    out: list[tuple[Archive, str]] = []
    runs = cuda_major_for_driver(getattr(host, "nvidia_driver", None))
    if runs is not None:
        cuda = [a for a in mains if _cuda_version(a.backend) and _cuda_version(a.backend)[0] <= runs]
        if cuda:
            driver_major = re.match(r"\d+", host.nvidia_driver).group(0)  # type: ignore[union-attr]
            out.append((max(cuda, key=lambda a: _cuda_version(a.backend)),
                        f"NVIDIA driver {driver_major} runs CUDA {runs}"))
    if getattr(host, "rocm", False):
        rocm = sorted((a for a in mains if backend_family(a.backend) == "rocm"), key=lambda a: a.backend, reverse=True)
        if rocm:
            out.append((rocm[0], "ROCm"))
    if getattr(host, "vulkan", False) and "vulkan" in by_backend:
        out.append((by_backend["vulkan"], "a Vulkan driver"))
    if "cpu" in by_backend:
        out.append((by_backend["cpu"], "the CPU build"))
    return out


def _plan_from(request: RequestLike, builds: Sequence[TestedBuild]) -> list[dict[str, Any]]:
    """``--from URL|PATH``: one plan for that archive, as named; no host-platform check.

    Raises:
        PlanRefused: a version that is not tested, without ``--untested``.
    """
    source = str(request.from_)
    name = source.rstrip("/").rsplit("/", 1)[-1]
    parsed = parse_name(name)
    version = request.version or (parsed.build if parsed else "custom")
    build = next((b for b in builds if b.version == version), None)
    if build is None and not request.untested:
        raise PlanRefused(_untested_message(version, builds))
    backend = request.backend or (parsed.backend if parsed else "cpu")
    pinned = next((a for a in build.archives if a.name == name), None) if build else None
    digest = request.sha256 or (pinned.sha256 if pinned else None)
    asset = {"name": name, "url": source, "sha256": digest, "size": pinned.size if pinned else None}
    out: dict[str, Any] = {"id": RUNTIME_ID, "version": version, "backend": backend,
                           "install": f"{version}-{backend}", "assets": [asset], "tested": build is not None,
                           "why": f"{source}, as named", "platform": parsed.platform if parsed else None,
                           "extra": None}
    if build is not None:
        out["layout"] = build.layout
    return [out]


def _untested_message(version: str, builds: Sequence[TestedBuild]) -> str:
    names = ", ".join(b.version for b in builds)
    return (f"llama.cpp {version} is not a build this adapter was tested with (tested: {names}); its C API "
            f"may differ: pass --untested to install it anyway")


def plan(request: RequestLike, recipe: Mapping[str, Any], host: Any,
         releases: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The ordered plans for ``request`` on ``host`` (SPEC §4.2; notes §3.3).

    Without ``--version`` and ``--from``, the plans of the newest tested build come first (in
    backend order), then those of each older tested build, as later fallbacks: an installer that
    finds the newest build unusable here still installs a tested one. An older build with nothing
    for this host adds no fallback.

    Raises:
        PlanRefused: as ``plan_build`` for the newest (or named) build.
    """
    if request.from_ or request.version:
        return plan_build(request, recipe, host, releases)
    builds = [b.version for b in tested(dict(recipe))]
    out = plan_build(replace(request, version=builds[0]), recipe, host, releases)  # type: ignore[type-var]
    for version in builds[1:]:
        try:
            out += plan_build(replace(request, version=version), recipe, host, releases)  # type: ignore[type-var]
        except PlanRefused:
            continue
    return out


def plan_build(request: RequestLike, recipe: Mapping[str, Any], host: Any,
               releases: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The ordered plans of one build (``request.version``, else the newest tested) on ``host``.

    A plan is ``{id, version, backend, install, assets: [{name, url, sha256|null, size|null}],
    tested, why, platform, layout (tested builds), extra}``. ``releases`` (objects with ``tag`` and
    ``assets`` of ``name, url, size, digest``) is read only for an untested build.

    Raises:
        PlanRefused: an untested build without ``--untested``; no archive of the build for this
            platform, or of the named backend; nothing of it runs here.
    """
    builds = tested(dict(recipe))
    if request.from_:
        return _plan_from(request, builds)
    version = request.version or builds[0].version
    build = next((b for b in builds if b.version == version), None)
    if build is None:
        if not request.untested:
            raise PlanRefused(_untested_message(version, builds))
        listed = _release_archives(version, releases)
        if listed is None:
            raise PlanRefused(f"llama.cpp {version} publishes no archive this adapter knows "
                              f"(no release {version} in the listing)")
        archives: Sequence[Archive] = listed
    else:
        archives = build.archives
    urls = _urls(version, releases)
    mains = [a for a in archives if not a.cudart and a.platform == host.platform]
    if not mains:
        raise PlanRefused(f"llama.cpp {version} publishes no build for {host.platform}")
    describe = host.describe()
    if request.backend:
        chosen = _by_backend(request.backend, mains, host, version)
        side, note = _cudart(chosen, archives, host)
        return [_plan(version, chosen, side, f"{describe}: {request.backend}, as named{note}",
                      tested_build=build, recipe=recipe, urls=urls)]
    out = []
    for archive, why in _ordered(mains, host):
        side, note = _cudart(archive, archives, host)
        out.append(_plan(version, archive, side, f"{describe}: {why}{note}", tested_build=build,
                         recipe=recipe, urls=urls))
    if not out:
        raise PlanRefused(f"no llama.cpp {version} build for {describe} runs here "
                          f"(it has: {', '.join(sorted(a.backend for a in mains))})")
    return out
