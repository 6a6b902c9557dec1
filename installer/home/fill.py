"""How a plan's verified archives fill a staging's ``lib/``: from the cache, or streamed in one pass.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from superfluid.installer.cache.blobs import sha256_file
from superfluid.installer.cache.download import Wanted, download_many
from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import VerificationError
from superfluid.installer.phases import phase
from superfluid.installer.sources.release import Asset
from superfluid.installer.sources.release_source import fetcher_for
from superfluid.installer.transport.urls import path_of_file_url
from superfluid.installer.unpack.extract import extract_all
from superfluid.installer.unpack.stream import download_and_extract, streams
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.planning import PlanAsset, is_local

if TYPE_CHECKING:
    from superfluid.installer.cache.download import Download, Progress
    from superfluid.installer.phases import Phases
    from superfluid.installer.settings import Settings
    from superfluid.installer.sources.release_source import ReleaseSource
    from superfluid.runtime.planning import Plan

__all__ = ["Verified", "Fill", "Unchecked", "fill_for", "fetch"]

log = logging.getLogger(__name__)

#: one archive of a plan on disk, verified: ``(asset, path, computed sha256)``
Verified = tuple[PlanAsset, Path, str]
#: fills a staging's ``lib/`` with a plan's archives; answers them in plan order
Fill = Callable[[Path], Sequence[Verified]]
#: told of a local file installed with no digest to check: ``(path, its sha256)``
Unchecked = Callable[[str, str], None]


def fill_for(p: Plan, source: ReleaseSource | None, *, settings: Settings, progress: Progress | None,
             phases: Phases | None, unchecked: Unchecked) -> Fill:
    """The fill of ``p``'s staging: streamed when ``p`` may stream (see the module doc), else
    ``fetch``ed now (the ``download`` phase) and extracted from the verified files when staged.
    ``source`` None: each URL as given (``--from``), through the home's cache.

    Raises:
        as ``fetch`` (nothing is fetched for a plan that streams: that happens when it is staged).
    """

    fill = _streaming(p, source, settings=settings, progress=progress, phases=phases)
    if fill is not None:
        return fill
    with phase(phases, "download"):
        fetched = fetch(p, source, settings=settings, progress=progress, unchecked=unchecked)
    return _extracting(fetched, phases)


def fetch(p: Plan, source: ReleaseSource | None, *, settings: Settings, progress: Progress | None,
          unchecked: Unchecked) -> list[Verified]:
    """Every asset of ``p`` verified on disk, in plan order.

    A local ``--from`` file is hashed in place (and checked when a digest is known; ``unchecked``
    is told when none is); a remote one goes through the cache like a release's. Nothing
    unverified is returned.

    Raises:
        VerificationError: bytes other than the digest names (nothing kept).
        DownloadError, OfflineMissing: the transfer failed, or a ``file://`` URL names another host.
        UsageError: a local file that does not exist.
    """

    out: list[Verified] = []
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
            unchecked(str(path), got)
        else:  # checked: kept in the cache as a download is
            _keep(path, got, source, settings)
        out.append((a, path, got))
    if remote:
        done = _download(remote, source, settings=settings, progress=progress)
        out.extend((a, d.path, d.sha256) for a, d in zip(remote, done, strict=True))
    order = {a.name: i for i, a in enumerate(p.assets)}
    return sorted(out, key=lambda t: order[t[0].name])


def _keep(path: Path, sha256: str, source: ReleaseSource | None, settings: Settings) -> None:
    """A local archive, checked against its digest, kept in the download cache like a downloaded one (a reflink, a hard
    link or a copy: ``BlobStore.keep_copy``), so that ``runtime repair`` finds it by its digest after
    the folder it came from moved (issue 42, item 30). A cache that cannot be written keeps nothing:
    the install goes on from the file where it is."""
    cache = source.cache if source is not None else Cache.for_home(settings.home)
    try:
        cache.blobs.keep_copy(path, sha256)
    except OSError as e:
        log.info("%s: not kept in the cache (%s)", path, e.strerror or e)


def _download(assets: Sequence[PlanAsset], source: ReleaseSource | None, *, settings: Settings,
              progress: Progress | None) -> list[Download]:
    if source is None:  # --from URL: a fetcher for that URL, the home's cache
        fetcher = fetcher_for(assets[0].url, settings.fetch, plain_http=True)
        try:
            return download_many([Wanted(a.url, a.sha256, a.size, a.name) for a in assets],
                                 cache=Cache.for_home(settings.home), fetcher=fetcher, progress=progress)
        finally:
            fetcher.close()

    return source.fetch_many([(Asset(a.name, a.url, a.size), a.sha256) for a in assets], progress=progress)


def _extracting(fetched: Sequence[Verified], phases: Phases | None) -> Fill:
    """The fill of archives already verified in the cache: ``extract_all`` from their files."""

    def fill(lib: Path) -> Sequence[Verified]:
        with phase(phases, "extract"):
            extract_all([path for _, path, _ in fetched], lib)
        return fetched

    return fill


def _streaming(p: Plan, source: ReleaseSource | None, *, settings: Settings, progress: Progress | None,
               phases: Phases | None) -> Fill | None:
    """The fill that downloads ``p``'s archive and extracts it in the same pass, or None when ``p``
    is not such a plan (see the module doc)."""

    if len(p.assets) != 1 or (source is not None and source.offline):
        return None
    a = p.assets[0]
    if is_local(a.url) or a.sha256 is None or a.size is None or not streams(a.name):
        return None
    cache = source.cache if source is not None else Cache.for_home(settings.home)
    if cache.blobs.blob_path(a.sha256).exists():
        return None  # the warm cache: extracted from the verified file
    sha256, size = a.sha256, a.size

    def fill(lib: Path) -> Sequence[Verified]:
        fetcher = (source.fetcher_of({a.url: sha256}) if source is not None
                   else fetcher_for(a.url, settings.fetch, plain_http=True))
        try:
            got = download_and_extract(a.url, sha256, size, lib, cache=cache, fetcher=fetcher, progress=progress,
                                       name=a.name, phases=phases)
        finally:
            if source is None:
                fetcher.close()
        return [(a, got.path, got.sha256)]

    return fill
