"""Release sources: the ``ReleaseSource`` protocol, and the sources composed of a lister and a fetcher.

See docs/architecture.md, "Where a new thing goes" (a new release source).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from superfluid.installer.cache.conditional import cached_get
from superfluid.installer.cache.download import Download, Progress, Wanted, download, download_many
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import OfflineMissing, SizeExceeded
from superfluid.installer.sources.bundles import Attested, Bundles
from superfluid.installer.sources.release import Asset, Release, tagged
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import FileFetcher, NoNetworkFetcher
from superfluid.installer.transport.messages import Credential
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.installer.transport.urls import origin_of
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.redact import split_userinfo

__all__ = [
    "ReleaseSource",
    "Lister",
    "CachedBytes",
    "ListedSource",
    "OfflineSource",
    "ByDigest",
    "fetcher_for",
    "basic_credential",
    "lister_bundles",
]

#: the fetcher of some URLs, each expected to be the bytes of its digest (``None``: not known)
ByDigest = Callable[[Mapping[str, str | None]], Fetcher]


class Lister(Protocol):
    """Where a source's releases are listed, and where it serves their assets (``GitHubClient``,
    ``Mirror``, ``OciListing``, or a new kind's)."""

    @property
    def warnings(self) -> list[str]:
        """What the listings read so far did not trust (a malformed release entry skipped, named)."""

    def describe(self) -> str:
        """Where releases come from, for messages: ``GitHub releases at https://api.github.com``."""

    def releases(self, repo: str) -> list[Release]:
        """Every published release of ``repo`` (drafts skipped, prereleases marked), as listed.

        Raises:
            ReleaseNotFound, RateLimited, OfflineMissing, BadFile, DownloadError.
        """

    def release(self, repo: str, tag: str) -> Release:
        """The published release ``tag`` of ``repo``.

        Raises:
            ReleaseNotFound, RateLimited, OfflineMissing, BadFile, DownloadError.
        """

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        """Where asset ``name`` of release ``tag`` is served (for recipe pins, which name assets
        without a listing)."""


class ReleaseSource(Lister, Protocol):
    """Lists releases and hands out verified asset bytes from one place: the seam every install,
    lock and manifest reads releases through (``ListedSource``, ``OfflineSource``, or a source of
    its own that keeps these methods)."""

    @property
    def cache(self) -> Cache:
        """The download cache every asset goes through."""

    @property
    def offline(self) -> bool:
        """Whether the source is the cache alone (it never opens a connection)."""

    @property
    def mirror(self) -> str | None:
        """The root of the mirror the source reads (``--mirror``, without a ``user:password@``), which
        a receipt records (``restore.mirror_of``); None for GitHub."""

    def asset(self, repo: str, tag: str, name: str, *, size: int | None = None, sha256: str | None = None) -> Asset:
        """An ``Asset`` for a pinned file, without asking the listing."""

    def fetch(
        self, asset: Asset, *, sha256: str | None, size: int | None = None, progress: Progress | None = None
    ) -> Download:
        """The asset's bytes in the cache, verified against ``sha256`` (``None``: accept and
        report the digest) and ``size`` (default: the listed size; it is also the cap).

        Raises:
            VerificationError: other bytes than expected; nothing kept.
            DownloadError: transfer failed after retries (``DownloadStalled``, ``RateLimited``...).
            OfflineMissing: offline and not cached.
        """

    def fetch_many(
        self, items: Sequence[tuple[Asset, str | None]], *, progress: Progress | None = None
    ) -> list[Download]:
        """``fetch`` each ``(asset, expected sha256)`` of a plan, several at once; answers in order.

        Raises:
            as ``fetch``: the first failure in plan order; the other downloads are stopped.
        """

    def read(self, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        """A small asset's bytes (a ``.sha256`` file, an ABI asset), cached with its ``ETag``; the
        asset's listed digest is the one asked for where the source fetches by digest.

        The bytes are not checked against the asset's listed digest here: that comparison is a
        rule and belongs to the caller (a mismatch is an ``InconsistentRelease``).

        Raises:
            SizeExceeded: the asset declares or sends more than ``max_bytes``
                (default ``FetchConfig.small_asset_max_bytes``).
            OfflineMissing, DownloadError: as ``fetch``.
        """

    def fetcher_of(self, digests: Mapping[str, str | None]) -> Fetcher:
        """The fetcher of these URLs' bytes, each expected to be the bytes of its digest: for a
        download read as it arrives (``unpack.stream``). It belongs to the source (closed with it)."""

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        """The Sigstore bundles the source holds for ``asset`` of ``repo`` (whose bytes are ``sha256``):
        its lister's when it knows where they are (``bundles.Attested``), else none. Not verified.

        Raises:
            ProvenanceRefused: what is there is not a bundle to read (``Attested.bundles``).
            DownloadError: asking failed.
        """

    def close(self) -> None:
        """Release pooled connections."""


@dataclass(frozen=True, slots=True)
class CachedBytes:
    """How every source has an asset's bytes: through ``cache``, verified against the digest expected
    of them, a small one within its cap; ``offline``, from the cache alone (by digest, or by URL when
    no digest is expected), what it lacks named with ``fix``. The one helper sources call.

    Args:
        cache: the download cache.
        config: the limits (the small-asset cap, ``rehash_cached``).
        offline: answer from the cache alone; never ask a fetcher.
        fix: the command that fills the cache, shown when something is missing offline.
    """

    cache: Cache
    config: FetchConfig
    offline: bool = False
    fix: Fix | None = None

    def missing(self, e: OfflineMissing) -> OfflineMissing:
        """``e`` with this source's fix."""
        return OfflineMissing(e.what, url=e.url, fix=self.fix) if self.fix else e

    def fetch(self, fetcher: Fetcher, asset: Asset, *, sha256: str | None, size: int | None = None,
              progress: Progress | None = None) -> Download:
        """As ``ReleaseSource.fetch``, through ``fetcher``."""
        size = asset.size if size is None else size
        if self.offline:
            return self._cached(asset, sha256, size)
        return download(asset.url, sha256, size, cache=self.cache, fetcher=fetcher, progress=progress,
                        name=asset.name)

    def fetch_many(self, fetcher: Fetcher, items: Sequence[tuple[Asset, str | None]], *,
                   progress: Progress | None = None) -> list[Download]:
        """As ``ReleaseSource.fetch_many``, through ``fetcher``."""
        if self.offline:
            return [self._cached(a, sha, a.size) for a, sha in items]
        wanted = [Wanted(a.url, sha, a.size, a.name) for a, sha in items]
        return download_many(wanted, cache=self.cache, fetcher=fetcher, progress=progress)

    def _cached(self, asset: Asset, sha256: str | None, size: int | None) -> Download:
        if sha256 is None:
            entry = self.cache.http.http_entry(asset.url)
            sha256 = entry.sha256 if entry is not None else None
        sha256 = sha256.lower() if sha256 else None
        path = self.cache.blobs.find_blob(sha256, size=size, rehash=self.config.rehash_cached) if sha256 else None
        if sha256 is None or path is None:
            raise OfflineMissing(f"download of {asset.name}", url=asset.url, fix=self.fix)
        return Download(asset.url, path, sha256, path.stat().st_size, cached=True)

    def read(self, fetcher: Fetcher, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        """As ``ReleaseSource.read``, through ``fetcher``."""
        cap = self.config.small_asset_max_bytes if max_bytes is None else max_bytes
        if asset.size is not None and asset.size > cap:
            raise SizeExceeded(asset.url, cap, asset.size)
        try:
            return self._read(fetcher, asset, cap)
        except OfflineMissing as e:
            raise self.missing(e) from None

    def _read(self, fetcher: Fetcher, asset: Asset, cap: int) -> bytes:
        want = asset.sha256
        if want:
            # Listed digest: the cache answers by content. A fresh transfer is cached only when it
            # matches, so bytes garbled once are never revalidated (304) into staying.
            cached = self.cache.blobs.read_blob(want, max_bytes=cap)
            if cached is not None:
                return cached
            if not self.offline:
                r, data = fetcher.get_bytes(asset.url, max_bytes=cap, headers={"Accept-Encoding": "identity"})
                if hashlib.sha256(data).hexdigest() == want:
                    self.cache.http.put_http_body(asset.url, data, etag=r.headers.get("etag"),
                                                  last_modified=r.headers.get("last-modified"))
                return data
        got = cached_get(asset.url, fetcher=fetcher, cache=self.cache, max_bytes=cap,
                         headers={"Accept-Encoding": "identity"}, offline=self.offline, what=f"asset {asset.name}")
        return got.body


def _pinned(url: str, name: str, size: int | None, sha256: str | None) -> Asset:
    return Asset(name, url, size, f"sha256:{sha256}" if sha256 else None)


class ListedSource:
    """A source online: releases listed by ``lister``, bytes fetched through ``fetcher`` into the
    cache (``CachedBytes``). GitHub, a mirror (a URL or a directory), a registry, or a new kind.

    Args:
        lister: where releases are listed (``GitHubClient``, ``Mirror``, ``OciListing``...).
        cache: the download cache every asset goes through.
        fetcher: the network seam for asset bytes (closed with the source).
        mirror: the mirror root, recorded in receipts (None: GitHub).
        by_digest: the fetcher of given URLs by the digest expected of each (a registry's blobs);
            default ``fetcher``, whatever the digest.
    """

    offline = False

    def __init__(self, lister: Lister, cache: Cache, fetcher: Fetcher, *, mirror: str | None = None,
                 by_digest: ByDigest | None = None) -> None:
        self.lister = lister
        self.cache = cache
        self.fetcher = fetcher
        self.mirror = mirror
        self.by_digest = by_digest
        self.cached_bytes = CachedBytes(cache, fetcher.config)

    def describe(self) -> str:
        return self.lister.describe()

    @property
    def warnings(self) -> list[str]:
        return list(self.lister.warnings)

    def releases(self, repo: str) -> list[Release]:
        return self.lister.releases(repo)

    def release(self, repo: str, tag: str) -> Release:
        return self.lister.release(repo, tag)

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        return self.lister.asset_url(repo, tag, name)

    def asset(self, repo: str, tag: str, name: str, *, size: int | None = None, sha256: str | None = None) -> Asset:
        return _pinned(self.asset_url(repo, tag, name), name, size, sha256)

    def fetcher_of(self, digests: Mapping[str, str | None]) -> Fetcher:
        return self.fetcher if self.by_digest is None else self.by_digest(digests)

    def fetch(
        self, asset: Asset, *, sha256: str | None, size: int | None = None, progress: Progress | None = None
    ) -> Download:
        return self.cached_bytes.fetch(self.fetcher_of({asset.url: sha256}), asset, sha256=sha256, size=size,
                                progress=progress)

    def fetch_many(
        self, items: Sequence[tuple[Asset, str | None]], *, progress: Progress | None = None
    ) -> list[Download]:
        return self.cached_bytes.fetch_many(self.fetcher_of({a.url: sha for a, sha in items}), items, progress=progress)

    def read(self, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        return self.cached_bytes.read(self.fetcher_of({asset.url: asset.sha256}), asset, max_bytes=max_bytes)

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        return lister_bundles(self.lister, repo, asset, sha256)

    def close(self) -> None:
        self.fetcher.close()


class OfflineSource:
    """The cache only. Listings as last fetched; assets by digest (or by URL when no digest is
    expected). Never opens a connection.

    Args:
        lister: a lister built with ``offline=True`` (its fetcher a ``NoNetworkFetcher``).
        cache: the cache to read.
        config: the limits (default ``FetchConfig()``).
        fix: the command that fills the cache, shown when something is missing.
        mirror: the mirror root the listings were read from, recorded in receipts (None: GitHub).
    """

    offline = True

    def __init__(self, lister: Lister, cache: Cache, *, config: FetchConfig | None = None, fix: Fix | None = None,
                 mirror: str | None = None) -> None:
        self.lister = lister
        self.cache = cache
        self.fix = fix
        self.mirror = mirror
        self.fetcher = NoNetworkFetcher(config or FetchConfig())
        self.cached_bytes = CachedBytes(cache, self.fetcher.config, offline=True, fix=fix)

    def describe(self) -> str:
        return f"the cache at {self.cache.root} (offline; {self.lister.describe()})"

    @property
    def warnings(self) -> list[str]:
        return list(self.lister.warnings)

    def releases(self, repo: str) -> list[Release]:
        try:
            return self.lister.releases(repo)
        except OfflineMissing as e:
            raise self.cached_bytes.missing(e) from None

    def release(self, repo: str, tag: str) -> Release:
        try:
            return self.lister.release(repo, tag)
        except OfflineMissing:
            pass
        # Not looked up by tag before: the cached listing may hold it.
        found = tagged(self.releases(repo), tag)
        if found is None:
            raise OfflineMissing(f"release {tag} of {repo}", fix=self.fix)
        return found

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        return self.lister.asset_url(repo, tag, name)

    def asset(self, repo: str, tag: str, name: str, *, size: int | None = None, sha256: str | None = None) -> Asset:
        return _pinned(self.asset_url(repo, tag, name), name, size, sha256)

    def fetcher_of(self, digests: Mapping[str, str | None]) -> Fetcher:
        return self.fetcher

    def fetch(
        self, asset: Asset, *, sha256: str | None, size: int | None = None, progress: Progress | None = None
    ) -> Download:
        return self.cached_bytes.fetch(self.fetcher, asset, sha256=sha256, size=size, progress=progress)

    def fetch_many(
        self, items: Sequence[tuple[Asset, str | None]], *, progress: Progress | None = None
    ) -> list[Download]:
        return self.cached_bytes.fetch_many(self.fetcher, items, progress=progress)

    def read(self, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        return self.cached_bytes.read(self.fetcher, asset, max_bytes=max_bytes)

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        return lister_bundles(self.lister, repo, asset, sha256)

    def close(self) -> None:
        self.fetcher.close()


def lister_bundles(lister: Lister, repo: str, asset: Asset, sha256: str) -> Bundles:
    """The bundles ``lister`` holds for ``asset`` when it knows where they are (``Attested``), else none.

    Raises:
        as ``Attested.bundles``.
    """
    if isinstance(lister, Attested):
        return lister.bundles(repo, asset, sha256)
    return Bundles((), lister.describe())


def basic_credential(url: str) -> tuple[str, Credential | None]:
    """``url`` without its ``user:password@``, and that userinfo as a Basic credential for the
    URL's origin alone (None when it has none): the URL is then kept and shown, the secret never."""


    clean, user, password = split_userinfo(url)
    if user is None and password is None:
        return url, None
    token = base64.b64encode(f"{user or ''}:{password or ''}".encode()).decode("ascii")
    return clean, Credential(origin_of(clean), f"Basic {token}")


def fetcher_for(url: str, config: FetchConfig | None = None, *, plain_http: bool = False) -> Fetcher:
    """A fetcher for one URL given by the user (``--from``): ``FileFetcher`` for ``file://``,
    else a ``RequestsFetcher`` (``plain_http`` allows ``http://`` to that URL's host; a
    ``user:password@`` in it is sent to that origin as Basic authorization)."""
    if urlsplit(url).scheme == "file":
        return FileFetcher(config)
    clean, credential = basic_credential(url)
    origins = [clean] if plain_http else []
    return RequestsFetcher(config, plain_http_origins=origins, credential=credential)
