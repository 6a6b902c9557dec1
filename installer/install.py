"""The install workflow (``superfluid runtime install <id>``): source → plans → digests settled →
download → stage → probe → publish, in that order, for any adapter.

The adapter chooses (``Adapter.plan``, reading the release listing through ``SourceListing``) and
judges (``Adapter.judge_probe``); this module only carries the plans out. Nothing is downloaded
before every digest is settled (SPEC §8.2), and a staged install is published only when its bytes
matched their digest and its worker's check passes. A plan of one remote archive whose digest is
known and that is not in the cache yet is downloaded and extracted in one pass
(``stream.download_and_extract``), into the staging directory under the runtime's lock; any other
plan is downloaded and verified into the cache first (no lock taken), then extracted from it. A
plan whose probe refuses is recorded and the next is tried; when every plan is refused, nothing was
installed. What happens is told through ``Event``s, which the face words; with a ``Phases`` the
wall-clock spans of listing, download, extract, probe and publish are recorded on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from superfluid.runtime.errors import InconsistentRelease, UsageError
from superfluid.runtime.planning import NotInstallable, Plan, PlanAsset, Request, is_local
from superfluid.runtime.probe import ProbeRefused

if TYPE_CHECKING:
    from superfluid.installer.download import Download, Progress
    from superfluid.installer.phases import Phases
    from superfluid.installer.publish import Published
    from superfluid.installer.sources import Asset, Release, ReleaseSource
    from superfluid.runtime.adapter import Adapter
    from superfluid.runtime.host import Host
    from superfluid.runtime.planning import AssetLike, ReleaseLike
    from superfluid.runtime.receipt import Receipt

__all__ = ["Event", "Outcome", "SourceListing", "install", "install_plans", "plan"]

#: seconds the staged worker's check may take before it is killed
PROBE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Event:
    """Something the workflow tells while it runs: ``kind`` is ``"trying"`` (``plan``, ``index``),
    ``"fell-back"`` (``plan``, ``reason``), ``"unchecked"`` (``path``, ``sha256``: a local file
    with no digest to check), ``"waiting"`` (``holder``: another install holds the lock) or
    ``"warning"`` (``reason``: something read was not trusted, e.g. a malformed listing entry skipped)."""

    kind: str
    plan: Plan | None = None
    index: int = 0
    reason: str = ""
    path: str = ""
    sha256: str = ""
    holder: str = ""


Tell = Callable[[Event], None]


@dataclass(frozen=True)
class Outcome:
    """The answer of ``install``: the plans, and what was installed unless it was a dry run."""

    id: str
    plans: tuple[Plan, ...]
    dry_run: bool
    source: str
    receipt: Receipt | None = None
    path: str | None = None
    replaced: bool = False
    current: str | None = None
    pinned: str | None = None
    fallbacks: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    cleaned: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """``--json``: the plans for ``--dry-run`` (schema ``plan``), else the install result
        (schema ``install-result``)."""
        out: dict[str, Any] = {"id": self.id, "dry_run": self.dry_run, "source": self.source,
                               "plans": [p.to_json() for p in self.plans]}
        if not self.dry_run:
            out.update(installed=self.receipt.install if self.receipt else None,
                       receipt=self.receipt.to_json() if self.receipt else None, path=self.path,
                       replaced=self.replaced, current=self.current, pinned=self.pinned,
                       fallbacks=[{"install": i, "why": w} for i, w in self.fallbacks])
        out["warnings"] = list(self.warnings)
        return out


# -- the listing an adapter plans from ---------------------------------------------------------------


class SourceListing:
    """One repository of a ``ReleaseSource``, as the planning interface's ``Listing``: releases
    listed once, small assets read and checked against the listing's digest."""

    def __init__(self, source: ReleaseSource, repo: str) -> None:
        self.source = source
        self.repo = repo
        self._releases: list[Release] | None = None
        self._seen: dict[str, tuple[Release, Asset]] = {}

    def _remember(self, rel: Release) -> Release:
        for a in rel.assets:
            self._seen[a.url] = (rel, a)
        return rel

    def releases(self) -> Sequence[ReleaseLike]:
        if self._releases is None:
            self._releases = [self._remember(r) for r in self.source.releases(self.repo)]
        return self._releases

    def release(self, tag: str, *, optional: bool = False) -> ReleaseLike | None:
        """The published release ``tag``; with ``optional``, None when it is not published or, offline,
        not in the cache (an older build's fallback plans that were never fetched are simply absent).

        Raises:
            ReleaseNotFound, OfflineMissing: (without ``optional``) as ``ReleaseSource.release``.
        """
        from superfluid.installer.errors import OfflineMissing, ReleaseNotFound

        try:
            return self._remember(self.source.release(self.repo, tag))
        except ReleaseNotFound:
            if optional:
                return None
            raise
        except OfflineMissing:
            if optional and self.source.offline:
                return None
            raise

    def asset_url(self, tag: str, name: str) -> str:
        return self.source.asset_url(self.repo, tag, name)

    def text(self, release: ReleaseLike, asset: AssetLike) -> str:
        """A small asset's text, checked against the listing's digest when it gives one (with that
        digest the source answers from the cache by content, and no request is made).

        Raises:
            InconsistentRelease: the bytes are not the ones the listing's digest names, or not text.
            DownloadError, OfflineMissing, SizeExceeded: as ``ReleaseSource.read``.
        """
        from superfluid.installer.github import Asset
        from superfluid.runtime.digests import api_sha256

        data = self.source.read(Asset(asset.name, asset.url, asset.size, asset.digest))
        want = api_sha256(asset.digest)
        got = hashlib.sha256(data).hexdigest()
        if want and got != want:
            raise InconsistentRelease(self.repo, release.tag, f"its bytes have SHA-256 {got}, and the listing's "
                                      f"digest is {want}", asset=asset.name, expected=want, got=got)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InconsistentRelease(self.repo, release.tag, "is not UTF-8 text", asset=asset.name) from None

    def settle(self, p: Plan, flag: str | None) -> Plan:
        """``p`` with each asset's ``.sha256`` read and its digest fixed (SPEC §8.2)."""
        from superfluid.runtime.digests import settle_asset

        assets = []
        for a in p.assets:
            if a.sidecar:
                rel, side = self._seen[a.sidecar]
                a = settle_asset(a, self.text(rel, side), flag=flag,  # type: ignore[arg-type]
                                 where=(self.repo, rel.tag))
            assets.append(a)
        return replace(p, assets=tuple(assets))


# -- source, listing, plans ---------------------------------------------------------------------------


def plan(request: Request, *, environ: Mapping[str, str], mirror: str | None = None, offline: bool = False,
         host: Host | None = None, source: ReleaseSource | None = None) -> tuple[list[Plan], str, ReleaseSource | None]:
    """The ordered plans with every digest settled, a description of where they come from, and the
    source (None for ``--from``, which reads no listing).

    Raises:
        UsageError: an unknown runtime, a bad ``--mirror``.
        NotInstallable, InconsistentRelease, DigestConflict: the adapter's refusals.
        DownloadError, RateLimited, OfflineMissing, ReleaseNotFound, BadFile: reading the listing.
    """
    from superfluid.runtime import registry
    from superfluid.runtime.host import detect

    adapter = registry.get(request.id)
    host = host or detect(environ)
    if request.from_:
        from superfluid.runtime.redact import redact_url

        return adapter.plan(request, host), redact_url(request.from_), None
    if source is None:
        from superfluid.installer.sources import source_for

        source = source_for(mirror=mirror, offline=offline, environ=environ,
                            fix=f"run `superfluid runtime install {request.id}` once without --offline")
    try:
        listing = SourceListing(source, adapter.repo)
        plans = [listing.settle(p, request.sha256) for p in adapter.plan(request, host, listing)]
    except BaseException:
        source.close()
        raise
    return plans, source.describe(), source


# -- download and verify ------------------------------------------------------------------------------


def _fetch(p: Plan, source: ReleaseSource | None, *, environ: Mapping[str, str], progress: Progress | None,
           tell: Tell) -> list[tuple[PlanAsset, Path, str]]:
    """Every asset of ``p`` verified on disk: ``(asset, path, computed sha256)``, in plan order.

    A local ``--from`` file is hashed in place (and checked when a digest is known); a remote one
    goes through the cache like a release's. Nothing unverified is returned.

    Raises:
        VerificationError: bytes other than the digest names (nothing kept).
        DownloadError, OfflineMissing: the transfer failed, or a ``file://`` URL names another host.
        UsageError: a local file that does not exist.
    """
    from superfluid.installer.cache import sha256_file
    from superfluid.installer.errors import VerificationError
    from superfluid.installer.fetcher import path_of_file_url

    out: list[tuple[PlanAsset, Path, str]] = []
    remote: list[PlanAsset] = []
    for a in p.assets:
        if not is_local(a.url):
            remote.append(a)
            continue
        path = Path(path_of_file_url(a.url) if a.url.startswith("file://") else a.url)
        if not path.is_file():
            raise UsageError(f"--from {a.url}: no such file")
        got = sha256_file(path)
        if a.sha256 is not None and got != a.sha256:
            raise VerificationError(str(path), "sha256", a.sha256, got)
        if a.sha256 is None:
            tell(Event("unchecked", p, path=str(path), sha256=got))
        out.append((a, path, got))
    if remote:
        done = _download(remote, source, environ=environ, progress=progress)
        out.extend((a, d.path, d.sha256) for a, d in zip(remote, done, strict=True))
    order = {a.name: i for i, a in enumerate(p.assets)}
    return sorted(out, key=lambda t: order[t[0].name])


def _download(assets: Sequence[PlanAsset], source: ReleaseSource | None, *, environ: Mapping[str, str],
              progress: Progress | None) -> list[Download]:
    from superfluid.installer.download import Wanted, download_many

    if source is None:  # --from URL: a fetcher for that URL, the home's cache
        from superfluid.installer.cache import Cache
        from superfluid.installer.sources import fetcher_for
        from superfluid.runtime.home import home

        fetcher = fetcher_for(assets[0].url, plain_http=True)
        cache = Cache.for_home(home(environ))
        try:
            return download_many([Wanted(a.url, a.sha256, a.size, a.name) for a in assets], cache=cache,
                                 fetcher=fetcher, progress=progress)
        finally:
            fetcher.close()
    from superfluid.installer.sources import Asset

    return source.fetch_many([(Asset(a.name, a.url, a.size), a.sha256) for a in assets], progress=progress)


# -- stage, probe, publish ----------------------------------------------------------------------------


def _probe(adapter: Adapter, p: Plan, staging: Path, *, environ: Mapping[str, str], untested: bool) -> Any:
    """Run the staged worker's check in a subprocess (scrubbed environment, stdin closed, timeout)
    and judge its report.

    Raises:
        ProbeRefused: the check refused the staged library, or the verdict did.
    """
    from superfluid.runtime.errors import WorkerFailed
    from superfluid.runtime.home import LIB, worker_path
    from superfluid.runtime.process import run_json

    argv = [str(staging / worker_path(p.id)), *adapter.probe_argv(str(staging / LIB))]
    env = {k: v for k, v in environ.items() if not k.startswith("SUPERFLUID_WORKER_")}
    try:
        report, _ = run_json(argv, environ=env, timeout=PROBE_TIMEOUT, accept=(0, 1))
    except WorkerFailed as e:
        raise ProbeRefused(p, f"its check failed: {e.reason}") from None
    if not isinstance(report, Mapping):
        raise ProbeRefused(p, "its check answered with something other than a report")
    return adapter.judge_probe(p, report, untested=untested)


#: fills a staging's ``lib/`` with a plan's verified archives; answers them as ``_fetch`` does
_Fill = Callable[[Path], Sequence[tuple[PlanAsset, Path, str]]]


def _extracting(fetched: Sequence[tuple[PlanAsset, Path, str]], phases: Phases | None) -> _Fill:
    """The fill of archives already verified in the cache: ``extract_all`` from their files."""

    def fill(lib: Path) -> Sequence[tuple[PlanAsset, Path, str]]:
        from superfluid.installer.extract import extract_all
        from superfluid.installer.phases import phase

        with phase(phases, "extract"):
            extract_all([path for _, path, _ in fetched], lib)
        return fetched

    return fill


def _streaming(p: Plan, source: ReleaseSource | None, *, environ: Mapping[str, str], progress: Progress | None,
               phases: Phases | None) -> _Fill | None:
    """The fill that downloads ``p``'s archive and extracts it in the same pass (the bytes
    verified before anything extracted is kept), or None when ``p`` is not such a plan: one remote
    tar whose digest and size are known, from a source that may connect, not in the cache yet."""
    from superfluid.installer.cache import Cache
    from superfluid.installer.stream import download_and_extract, streams
    from superfluid.runtime.home import home

    if len(p.assets) != 1 or (source is not None and source.offline):
        return None
    a = p.assets[0]
    if is_local(a.url) or a.sha256 is None or a.size is None or not streams(a.name):
        return None
    cache = source.cache if source is not None else Cache.for_home(home(environ))
    if cache.blob_path(a.sha256).exists():
        return None  # the warm cache: extracted from the verified file
    sha256, size = a.sha256, a.size

    def fill(lib: Path) -> Sequence[tuple[PlanAsset, Path, str]]:
        from superfluid.installer.sources import fetcher_for

        fetcher = source.fetcher if source is not None else fetcher_for(a.url, plain_http=True)
        try:
            got = download_and_extract(a.url, sha256, size, lib, cache=cache, fetcher=fetcher, progress=progress,
                                       name=a.name, phases=phases)
        finally:
            if source is None:
                fetcher.close()
        return [(a, got.path, got.sha256)]

    return fill


def _install_one(adapter: Adapter, p: Plan, fill: _Fill, *, home: str, environ: Mapping[str, str], untested: bool,
                 platform: str, tell: Tell, lock: Mapping[str, str] | None = None,
                 phases: Phases | None = None) -> Published:
    import time

    from superfluid.installer.phases import phase
    from superfluid.installer.publish import install_staged
    from superfluid.runtime.home import LIB
    from superfluid.runtime.receipt import Source, receipt_for

    populated = 0.0

    def populate(staging: Path) -> Receipt:
        nonlocal populated
        fetched = fill(staging / LIB)
        with phase(phases, "probe"):
            probed = _probe(adapter, p, staging, environ=environ, untested=untested)
        receipt = receipt_for(p, [Source(a.url, sha) for a, _, sha in fetched], probed, platform, lock=lock)
        populated = time.monotonic()
        return receipt

    def waiting(holder: Any) -> None:
        tell(Event("waiting", p, holder=holder.describe()))

    published = install_staged(home, p.id, p.install, populate, lambda _staging: None, on_wait=waiting,
                               command=f"superfluid runtime install {p.id}")
    if phases is not None and populated:
        phases.add("publish", populated, time.monotonic())
    return published


def install(request: Request, *, environ: Mapping[str, str], mirror: str | None = None, offline: bool = False,
            dry_run: bool = False, tell: Tell | None = None, progress: Progress | None = None,
            host: Host | None = None, source: ReleaseSource | None = None, phases: Phases | None = None) -> Outcome:
    """``superfluid runtime install``: plan, and unless ``dry_run``, download, verify, stage,
    probe and publish the first plan that runs here (see the module doc for the sequence); the
    phases' spans are recorded on ``phases`` when given.

    Raises:
        UsageError: as ``plan``.
        NotInstallable: the rules refuse, or every plan's probe refused (names each reason).
        ProbeRefused: the only plan's probe refused.
        InconsistentRelease, DigestConflict, VerificationError: SPEC §8.2 (nothing installed).
        DownloadError, OfflineMissing, ReleaseNotFound, BadFile: reading the source.
        UnsafeArchive, StoreError, LockBusy: extraction and the store (nothing installed).
    """
    from superfluid.installer.phases import phase
    from superfluid.runtime.host import detect

    tell = tell or (lambda _event: None)
    host = host or detect(environ)
    with phase(phases, "listing"):
        plans, where, src = plan(request, environ=environ, mirror=mirror, offline=offline, host=host, source=source)
    try:
        listed = tuple(src.warnings) if src is not None else ()
        for warning in listed:  # a malformed release entry was skipped: said, never silent
            tell(Event("warning", reason=warning))
        if dry_run:
            return Outcome(request.id, tuple(plans), True, where, warnings=listed)
        done = install_plans(request.id, plans, environ=environ, source=src, where=where, untested=request.untested,
                             tell=tell, progress=progress, platform=host.platform, phases=phases)
        return replace(done, warnings=listed + done.warnings)
    finally:
        if src is not None:
            src.close()


def install_plans(runtime_id: str, plans: Sequence[Plan], *, environ: Mapping[str, str], where: str,
                  source: ReleaseSource | None = None, untested: bool = False, tell: Tell | None = None,
                  progress: Progress | None = None, platform: str | None = None,
                  lock: Mapping[str, str] | None = None, phases: Phases | None = None) -> Outcome:
    """Download, verify, stage, probe and publish the first of ``plans`` (digests already settled)
    that runs here; the others are its fallbacks. No listing is read: ``source`` (None: each URL
    as given, through the home's cache) only fetches. ``lock`` names the lock the plans came from
    (``{"file", "sha256"}``), which the receipt records. ``phases`` records the phases' spans.

    Raises:
        NotInstallable: every plan's probe refused (names each reason), or there is none.
        ProbeRefused: the only plan's probe refused.
        VerificationError, DownloadError, OfflineMissing, UsageError: fetching (nothing installed).
        UnsafeArchive, StoreError, LockBusy: extraction and the store (nothing installed).
    """
    from superfluid.installer.phases import phase
    from superfluid.runtime import registry
    from superfluid.runtime.home import home as home_of
    from superfluid.runtime.host import detect

    tell = tell or (lambda _event: None)
    platform = platform or detect(environ).platform
    adapter = registry.get(runtime_id)
    fallbacks: list[tuple[str, str]] = []
    warnings: list[str] = []

    def note(event: Event) -> None:
        if event.kind == "unchecked":
            warnings.append(f"{event.path} has no SHA-256 to check it against: installing a local file "
                            f"unchecked (its SHA-256 is {event.sha256})")
        tell(event)

    for i, p in enumerate(plans):
        absent = [a.name for a in p.assets if a.digest_source == "absent"]
        if absent:  # the release does not publish this plan's archive: the next plan is tried
            reason = f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not in this release"
            fallbacks.append((p.install, reason))
            if i + 1 < len(plans):
                tell(Event("fell-back", p, index=i, reason=reason))
                continue
            raise NotInstallable(f"no {p.id} build installs here: " + "; ".join(f"{n}: {w}" for n, w in fallbacks)
                                 if len(plans) > 1 else f"{p.id} {p.install}: {reason}")
        tell(Event("trying", p, index=i))
        fill = _streaming(p, source, environ=environ, progress=progress, phases=phases)
        if fill is None:
            with phase(phases, "download"):
                fetched = _fetch(p, source, environ=environ, progress=progress, tell=note)
            fill = _extracting(fetched, phases)
        try:
            published = _install_one(adapter, p, fill, home=home_of(environ), environ=environ,
                                     untested=untested, platform=platform, tell=tell, lock=lock, phases=phases)
        except ProbeRefused as e:
            fallbacks.append((p.install, e.reason))
            if i + 1 < len(plans):
                tell(Event("fell-back", p, index=i, reason=e.reason))
                continue
            if len(plans) == 1:
                raise
            raise NotInstallable(f"no {p.id} build runs here: "
                                 + "; ".join(f"{n}: {w}" for n, w in fallbacks)) from None
        return Outcome(runtime_id, tuple(plans), False, where, published.receipt, str(published.path),
                       published.replaced, published.current, published.pinned, tuple(fallbacks),
                       tuple(warnings), published.cleaned)
    raise NotInstallable(f"nothing of {runtime_id} to install here")
