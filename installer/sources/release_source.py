"""Release sources: where releases are listed and where their bytes come from."""

from __future__ import annotations

import base64
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from superfluid.installer.cache.conditional import cached_get
from superfluid.installer.cache.download import Download, Progress, Wanted, download, download_many
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import OfflineMissing, SizeExceeded
from superfluid.installer.sources.github import GitHubClient
from superfluid.installer.sources.mirror import Mirror
from superfluid.installer.sources.release import Asset, Release
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import FileFetcher, NoNetworkFetcher
from superfluid.installer.transport.loopback import network_fetcher
from superfluid.installer.transport.messages import Credential
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.installer.transport.urls import origin_of
from superfluid.runtime.kernel.redact import split_userinfo

__all__ = [
    "ReleaseSource",
    "GitHubSource",
    "MirrorSource",
    "OfflineSource",
    "Asset",
    "Release",
    "Download",
    "fetcher_for",
]


class ReleaseSource(ABC):
    """Lists releases and hands out verified asset bytes from one place.

    Args:
        lister: the listing protocol (``GitHubClient`` or ``Mirror``).
        cache: the download cache every asset goes through.
        fetcher: the network seam for asset bytes.
    """

    offline = False

    def __init__(self, lister: GitHubClient | Mirror, cache: Cache, fetcher: Fetcher) -> None:
        self.lister = lister
        self.cache = cache
        self.fetcher = fetcher

    def describe(self) -> str:
        """Where releases come from, for messages: ``GitHub releases at https://api.github.com``."""
        return self.lister.describe()

    @property
    def warnings(self) -> list[str]:
        """What the listings read so far did not trust (a malformed release entry skipped, named)."""
        return list(self.lister.warnings)

    def releases(self, repo: str) -> list[Release]:
        """Every published release of ``repo`` (drafts skipped, prereleases marked), as listed.

        Raises:
            ReleaseNotFound, RateLimited, OfflineMissing, BadFile, DownloadError.
        """
        return self.lister.releases(repo)

    def release(self, repo: str, tag: str) -> Release:
        """The published release ``tag`` of ``repo``.

        Raises:
            ReleaseNotFound, RateLimited, OfflineMissing, BadFile, DownloadError.
        """
        return self.lister.release(repo, tag)

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        """Where this source serves asset ``name`` of release ``tag`` (for recipe pins, which
        name assets without a listing)."""
        return self.lister.asset_url(repo, tag, name)

    def asset(self, repo: str, tag: str, name: str, *, size: int | None = None, sha256: str | None = None) -> Asset:
        """An ``Asset`` for a pinned file, without asking the listing."""
        return Asset(name, self.asset_url(repo, tag, name), size, f"sha256:{sha256}" if sha256 else None)

    @abstractmethod
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
        wanted = [Wanted(a.url, sha, a.size, a.name) for a, sha in items]
        return download_many(wanted, cache=self.cache, fetcher=self.fetcher, progress=progress)

    def read(self, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        """A small asset's bytes (a ``.sha256`` file, an ABI asset), cached with its ``ETag``.

        The bytes are not checked against the asset's listed digest here: that comparison is a
        rule and belongs to the caller (a mismatch is an ``InconsistentRelease``).

        Raises:
            SizeExceeded: the asset declares or sends more than ``max_bytes``
                (default ``FetchConfig.small_asset_max_bytes``).
            OfflineMissing, DownloadError: as ``fetch``.
        """
        cap = self.fetcher.config.small_asset_max_bytes if max_bytes is None else max_bytes
        if asset.size is not None and asset.size > cap:
            raise SizeExceeded(asset.url, cap, asset.size)
        want = asset.sha256
        if want:
            # Listed digest: the cache answers by content. A fresh transfer is cached only when it
            # matches, so bytes garbled once are never revalidated (304) into staying.
            cached = self.cache.blobs.read_blob(want, max_bytes=cap)
            if cached is not None:
                return cached
            if not self.offline:
                r, data = self.fetcher.get_bytes(asset.url, max_bytes=cap, headers={"Accept-Encoding": "identity"})
                if hashlib.sha256(data).hexdigest() == want:
                    self.cache.http.put_http_body(asset.url, data, etag=r.headers.get("etag"),
                                             last_modified=r.headers.get("last-modified"))
                return data
        got = cached_get(asset.url, fetcher=self.fetcher, cache=self.cache, max_bytes=cap,
                         headers={"Accept-Encoding": "identity"}, offline=self.offline, what=f"asset {asset.name}")
        return got.body

    def close(self) -> None:
        """Release pooled connections."""
        self.fetcher.close()


class GitHubSource(ReleaseSource):
    """GitHub's releases API and download URLs."""

    def fetch(
        self, asset: Asset, *, sha256: str | None, size: int | None = None, progress: Progress | None = None
    ) -> Download:
        return download(asset.url, sha256, asset.size if size is None else size, cache=self.cache,
                        fetcher=self.fetcher, progress=progress, name=asset.name)


class MirrorSource(GitHubSource):
    """A mirror root (static HTTP server or directory); same rules, other place."""


class OfflineSource(ReleaseSource):
    """The cache only. Listings as last fetched; assets by digest (or by URL when no digest is
    expected). Never opens a connection.

    Args:
        lister: a ``GitHubClient``/``Mirror`` built with ``offline=True``.
        cache: the cache to read.
        fix: the command that fills the cache, shown when something is missing.
    """

    offline = True

    def __init__(self, lister: GitHubClient | Mirror, cache: Cache, *, fix: str | None = None) -> None:
        super().__init__(lister, cache, NoNetworkFetcher(lister.fetcher.config))
        self.fix = fix

    def describe(self) -> str:
        return f"the cache at {self.cache.root} (offline; {self.lister.describe()})"

    def _missing(self, e: OfflineMissing) -> OfflineMissing:
        return OfflineMissing(e.what, url=e.url, fix=self.fix) if self.fix else e

    def releases(self, repo: str) -> list[Release]:
        try:
            return super().releases(repo)
        except OfflineMissing as e:
            raise self._missing(e) from None

    def release(self, repo: str, tag: str) -> Release:
        try:
            return super().release(repo, tag)
        except OfflineMissing:
            pass
        # Not looked up by tag before: the cached listing may hold it.
        for release in self.releases(repo):
            if release.tag == tag:
                return release
        raise OfflineMissing(f"release {tag} of {repo}", fix=self.fix)

    def read(self, asset: Asset, *, max_bytes: int | None = None) -> bytes:
        try:
            return super().read(asset, max_bytes=max_bytes)
        except OfflineMissing as e:
            raise self._missing(e) from None

    def fetch(
        self, asset: Asset, *, sha256: str | None, size: int | None = None, progress: Progress | None = None
    ) -> Download:
        size = asset.size if size is None else size
        rehash = self.fetcher.config.rehash_cached
        if sha256 is None:
            entry = self.cache.http.http_entry(asset.url)
            sha256 = entry.sha256 if entry is not None else None
        path = self.cache.blobs.find_blob(sha256.lower(), size=size, rehash=rehash) if sha256 else None
        if path is None:
            raise OfflineMissing(f"download of {asset.name}", url=asset.url, fix=self.fix)
        assert sha256 is not None
        return Download(asset.url, path, sha256.lower(), path.stat().st_size, cached=True)

    def fetch_many(
        self, items: Sequence[tuple[Asset, str | None]], *, progress: Progress | None = None
    ) -> list[Download]:
        return [self.fetch(a, sha256=s) for a, s in items]


def basic_credential(url: str) -> tuple[str, Credential | None]:
    """``url`` without its ``user:password@``, and that userinfo as a Basic credential for the
    URL's origin alone (None when it has none): the URL is then kept and shown, the secret never."""


    clean, user, password = split_userinfo(url)
    if user is None and password is None:
        return url, None
    token = base64.b64encode(f"{user or ''}:{password or ''}".encode()).decode("ascii")
    return clean, Credential(origin_of(clean), f"Basic {token}")


def fetcher_for(url: str, config: FetchConfig | None = None, *, plain_http: bool = False,
                environ: Mapping[str, str] | None = None) -> Fetcher:
    """A fetcher for one URL given by the user (``--from``): ``FileFetcher`` for ``file://``,
    else the network's (``plain_http`` allows ``http://`` to that URL's host; a ``user:password@``
    in it is sent to that origin as Basic authorization): with ``environ``, chosen as a source's is
    (``network_fetcher``: the standard library's for this machine), else ``RequestsFetcher``."""
    if urlsplit(url).scheme == "file":
        return FileFetcher(config)
    clean, credential = basic_credential(url)
    origins = [clean] if plain_http else []
    if environ is None:
        return RequestsFetcher(config, plain_http_origins=origins, credential=credential)
    return network_fetcher(clean, environ, config or FetchConfig(), plain_http_origins=origins, credential=credential)
