"""Making a lock, choosing from it and checking it: the installer's own plans for declared machines.

See docs/fleet.md, "Checking and upgrading".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from superfluid.installer.cache.download import Download
from superfluid.installer.fleet.lockfile import DEFAULT_NAME, Engine, Lock, LockFileError, Target, lock_fix
from superfluid.installer.install import plan
from superfluid.installer.settings import Settings
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.mirror import path_of_url
from superfluid.installer.sources.release_source import ReleaseSource
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.ordering import backend_rank, version_key
from superfluid.runtime.planning import NotInstallable, Request, backend_runs_here, first_published

if TYPE_CHECKING:
    from superfluid.installer.cache.download import Progress
    from superfluid.installer.cache.stores import Cache
    from superfluid.installer.sources.bundles import Bundles
    from superfluid.installer.sources.release import Asset, Release
    from superfluid.installer.transport.fetcher import Fetcher

__all__ = [
    "HOSTS",
    "DECLARED_NVIDIA_DRIVER",
    "PLATFORMS",
    "Change",
    "check_targets",
    "host_for",
    "targets_of",
    "kinds_of",
    "plan_engine",
    "select",
    "compare",
]

#: the platforms a lock may name (SPEC §3)
PLATFORMS = ("linux-x64", "linux-arm64", "macos-x64", "macos-arm64")

#: the NVIDIA driver a ``cuda`` machine declares: the newest line we know (580, which runs CUDA 13
#: and every older major), so that the newest CUDA build a release has is chosen
DECLARED_NVIDIA_DRIVER = "580.95.05"

#: ``--backend B``, a kind of machine -> the host facts it declares beyond its platform (SPEC §3).
#: ``cpu``: nothing (the CPU build; on Apple silicon the Metal build, which every such Mac runs);
#: ``cuda``: an NVIDIA driver and no system CUDA runtime (so a CUDA build comes with its runtime
#: archive, and the machine needs nothing but the driver); ``rocm``: ROCm; ``vulkan``: a Vulkan
#: driver; ``metal``: Apple silicon (macos-arm64 only). Linux only for cuda, rocm and vulkan.
HOSTS: Mapping[str, Mapping[str, object]] = {
    "metal": {},
    "cuda": {"nvidia_driver": DECLARED_NVIDIA_DRIVER},
    "rocm": {"rocm": True},
    "vulkan": {"vulkan": True},
    "cpu": {},
}

_PLATFORM = re.compile(r"(linux|macos)-(x64|arm64)")


def _fits(kind: str, platform: str) -> bool:
    """Whether a machine of ``kind`` can be a ``platform`` machine at all."""
    if kind == "metal":
        return platform == "macos-arm64"
    return kind == "cpu" or platform.startswith("linux-")


def check_targets(runtimes: Iterable[str], platforms: Iterable[str], backends: Iterable[str]) -> None:
    """Refuse a runtime this superfluid does not ship, a platform or kind of machine it does not know,
    and a kind that fits none of the platforms named.

    Raises:
        UsageError: names the value and what is known (exit 2).
    """

    for r in runtimes:
        registry.get(r)
    platforms = list(platforms)
    for p in platforms:
        if not _PLATFORM.fullmatch(p):
            raise UsageError(f"--platform {p!r} is not a platform ({', '.join(PLATFORMS)})")
    for b in backends:
        if b not in HOSTS:
            raise UsageError(f"--backend {b!r} is not a kind of machine a lock is written for "
                             f"({', '.join(sorted(HOSTS, key=backend_rank))})")
        if platforms and not any(_fits(b, p) for p in platforms):
            raise UsageError(f"--backend {b} fits none of the platforms named ({', '.join(platforms)}): "
                             f"{'metal is macos-arm64 only' if b == 'metal' else f'{b} machines run Linux'}")


def host_for(platform: str, kind: str) -> Host:
    """The host a ``kind`` machine of ``platform`` is planned as (``HOSTS``)."""
    os_name, arch = platform.split("-", 1)
    facts = HOSTS[kind]
    return Host(os=os_name, arch=arch, nvidia_driver=facts.get("nvidia_driver"),  # type: ignore[arg-type]
                rocm=bool(facts.get("rocm")), vulkan=bool(facts.get("vulkan")))


def targets_of(runtimes: Iterable[str], platforms: Iterable[str], backends: Iterable[str]) -> list[Target]:
    """Every runtime x platform x kind of machine, without the kinds a platform cannot be; sorted."""
    out = {Target(r, p, b) for r in runtimes for p in platforms for b in backends if _fits(b, p)}
    return sorted(out, key=Target.sort_key)


def kinds_of(host: Host) -> list[str]:
    """The kinds of machine ``host`` is, best first: ``cpu`` always, and each accelerator whose
    backend runs here (``planning.backend_runs_here``, the rule the planners apply)."""
    kinds = [k for k in HOSTS if _fits(k, host.platform) and backend_runs_here(k, host.platform, host) is None]
    return sorted(kinds, key=lambda k: (backend_rank(k), k))


# -- planning an engine -------------------------------------------------------------------------------


class _Recording:
    """A source that keeps every small file read through it: the evidence a choice was made on
    (a baseRT release's ABI asset, an asset's ``.sha256``), to be locked and mirrored with it.
    Everything else is ``inner``'s."""

    def __init__(self, inner: ReleaseSource) -> None:
        self.inner = inner
        self.read_files: dict[str, tuple[int, str]] = {}

    @property
    def cache(self) -> Cache:
        return self.inner.cache

    @property
    def offline(self) -> bool:
        return self.inner.offline

    @property
    def mirror(self) -> str | None:
        return self.inner.mirror

    @property
    def warnings(self) -> list[str]:
        return self.inner.warnings

    def describe(self) -> str:
        return self.inner.describe()

    def releases(self, repo: str) -> list[Release]:
        return self.inner.releases(repo)

    def release(self, repo: str, tag: str) -> Release:
        return self.inner.release(repo, tag)

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        return self.inner.asset_url(repo, tag, name)

    def asset(self, repo: str, tag: str, name: str, *, size: int | None = None, sha256: str | None = None) -> Asset:
        return self.inner.asset(repo, tag, name, size=size, sha256=sha256)

    def read(self, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        data = self.inner.read(asset, max_bytes=max_bytes)
        self.read_files[asset.url] = (len(data), hashlib.sha256(data).hexdigest())
        return data

    def fetch(self, asset: Asset, *, sha256: str | None, size: int | None = None,
              progress: Progress | None = None) -> Download:
        return self.inner.fetch(asset, sha256=sha256, size=size, progress=progress)

    def fetch_many(self, items: Sequence[tuple[Asset, str | None]], *,
                   progress: Progress | None = None) -> list[Download]:
        return self.inner.fetch_many(items, progress=progress)

    def fetcher_of(self, digests: Mapping[str, str | None]) -> Fetcher:
        return self.inner.fetcher_of(digests)

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        return self.inner.bundles(repo, asset, sha256)

    def close(self) -> None:
        self.inner.close()


def plan_engine(request: Request, target: Target, settings: Settings, *, fill: Fix | None = None) -> Engine:
    """The engine of ``target``: the first plan ``install.plan`` answers for ``request`` on a machine
    of the target's kind (``host_for``), its digests settled, with the evidence it was chosen on.
    Every lock's engine comes from here. A plan whose files the release does not publish (``absent``)
    is skipped, as an install skips it. ``settings`` as ``install.plan``'s; ``fill``: the command that
    fills the cache, the fix of what ``--offline`` lacks.

    Raises:
        NotInstallable: nothing of the runtime installs on such a machine.
        LockFileError: the plan cannot be locked (no digest, no size, no mirror path).
        InconsistentRelease, DigestConflict, DownloadError, RateLimited, OfflineMissing,
        ReleaseNotFound, BadFile: as ``install.plan``.
    """

    repo = registry.get(request.id).repo
    source = _Recording(source_for(settings, fix=fill))
    plans, _, _ = plan(request, settings, host=host_for(target.platform, target.host), source=source)
    source.close()
    first = first_published(plans)
    if first is None:
        raise NotInstallable(f"{target.describe()}: the release publishes none of the files its plans name ("
                             + "; ".join(f"{p.install}: {', '.join(a.name for a in p.assets)}" for p in plans) + ")")
    release = path_of_url(first.assets[0].url)
    evidence = [(url, size, sha) for url, (size, sha) in source.read_files.items()
                if release is not None and (path_of_url(url) or ("", "", ""))[:2] == release[:2]]
    return Engine.from_plan(target, repo, first, evidence)


# -- choosing from a lock -----------------------------------------------------------------------------


def select(lock: Lock, host: Host, runtime: str | None = None, *, lock_name: str = DEFAULT_NAME
           ) -> dict[str, list[Engine]]:
    """What this host installs from ``lock``: per runtime (``runtime`` alone when named), the
    engines of the kinds of machine it is, best kind first (the later ones are its fallbacks when
    the first's probe refuses), each install once.

    Raises:
        LockFileError: the lock has nothing for this platform, or nothing of ``runtime`` for it, or
            nothing for any kind of machine this host is; says the command that adds it.
    """
    mine = [e for e in lock.engines if e.target.platform == host.platform]
    kinds = kinds_of(host)
    best = kinds[0]
    add = ("--platform", host.platform, *(("--backend", best) if best != "cpu" else ()))
    if not mine:
        held = ", ".join(sorted({e.target.platform for e in lock.engines})) or "none"
        raise LockFileError(
            f"{lock_name} has no engine for {host.platform} (this is {host.describe()}; it holds: {held})",
            fix=lock_fix(lock_name, *add, does="adds it"))
    wanted = [runtime] if runtime else sorted({e.target.runtime for e in mine})
    out: dict[str, list[Engine]] = {}
    for r in wanted:
        engines = {e.target.host: e for e in mine if e.target.runtime == r}
        if not engines:
            raise LockFileError(f"{lock_name} has no {r} engine for {host.platform}",
                                fix=lock_fix(lock_name, "--runtime", r, *add, does="adds it"))
        chosen: list[Engine] = []
        for kind in kinds:
            e = engines.get(kind)
            if e is not None and all(c.install != e.install for c in chosen):
                chosen.append(e)
        if not chosen:
            raise LockFileError(f"{lock_name} has {r} for {host.platform} only for "
                            f"{', '.join(sorted(engines))} machines, and this is {host.describe()}",
                                fix=lock_fix(lock_name, "--runtime", r, *add, does="adds this kind"))
        out[r] = chosen
    return out


# -- what moved -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """How one target's engine differs from what would be chosen now.

    ``kind``: ``"moved"`` (another install is chosen; ``why`` says what: a newer tested build, a new
    ABI-N release), ``"new"`` (the lock has no engine for it, and one installs now), ``"gone"``
    (nothing installs any more), ``"changed"`` (the same install, other files) or ``"digest"`` (a
    file's bytes changed under the same name: an error).
    """

    target: Target
    kind: str
    old: Engine | None
    new: Engine | None
    why: str

    @property
    def error(self) -> bool:
        return self.kind in ("digest", "gone")


def _moved_why(old: Engine, new: Engine) -> str:
    if old.version != new.version:
        newer = version_key(new.version) > version_key(old.version)
        if new.chosen_by == "tested":
            what = "a newer tested build" if newer else "another tested build"
        elif new.chosen_by == "abi" and new.abi is not None:
            what = f"a {'new' if newer else 'another'} ABI-{new.abi} release"
        elif new.chosen_by == "line":
            what = f"a {'newer' if newer else 'another'} release of the unnumbered line"
        elif new.chosen_by == "pin":
            what = "the release this superfluid's recipe pins"
        else:
            what = "another release"
        return f"{what}: {new.why}"
    return f"another backend: {new.why}"


def _digest_changes(old: Engine, new: Engine) -> list[str]:
    now = {f.path: f for f in new.files()}
    return [f"{f.name}: locked sha256 {f.sha256}, now {now[f.path].sha256}"
            for f in old.files() if f.path in now and now[f.path].sha256 != f.sha256]


def compare(lock: Lock, now: Mapping[Target, Engine | str],
            same_release: Callable[[Engine], Engine | None] | None = None) -> list[Change]:
    """What moved, target by target, between ``lock`` and ``now`` (each target's engine as chosen
    now, or why nothing installs). Files are compared by mirror path, never by URL (a mirror changes
    where bytes come from, not which). ``same_release(old)`` answers the locked install as its
    release serves it now, when the choice moved away from it: bytes changed under its name are
    an error too.
    """
    out: list[Change] = []
    for target in sorted(set(now) | {e.target for e in lock.engines}, key=Target.sort_key):
        old, new = lock.engine(target), now.get(target)
        if isinstance(new, str):
            if old is not None:
                out.append(Change(target, "gone", old, None, new))
            continue
        if new is None:
            continue
        if old is None:
            out.append(Change(target, "new", None, new, new.why))
            continue
        if old.install != new.install:
            again = same_release(old) if same_release else None
            changed = _digest_changes(old, again) if again is not None else []
            if changed:
                out.append(Change(target, "digest", old, again, "; ".join(changed)))
            out.append(Change(target, "moved", old, new, _moved_why(old, new)))
            continue
        changed = _digest_changes(old, new)
        if changed:
            out.append(Change(target, "digest", old, new, "; ".join(changed)))
        elif [(f.path, f.size) for f in old.assets] != [(f.path, f.size) for f in new.assets]:
            out.append(Change(target, "changed", old, new, "its release's files changed"))
    return out

