"""Release sources: where releases are listed and where their bytes come from."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from superfluid.installer.cache.blobs import Cache
from superfluid.installer.cache.download import Download, Progress, Wanted, download, download_many
from superfluid.installer.config import DEFAULT_GITHUB_API, FetchConfig
from superfluid.installer.errors import OfflineMissing, SizeExceeded
from superfluid.installer.sources.github import Asset, GitHubClient, Release, cached_get, token_from
from superfluid.installer.sources.mirror import Mirror, mirror_root_url
from superfluid.installer.transport.fetcher import (
    Credential,
    Fetcher,
    FileFetcher,
    NoNetworkFetcher,
    RequestsFetcher,
    origin_of,
)
from superfluid.runtime import home as _home
from superfluid.runtime.errors import UsageError

__all__ = [
    "ReleaseSource",
    "GitHubSource",
    "MirrorSource",
    "OfflineSource",
    "Asset",
    "Release",
    "Download",
    "source_for",
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
            cached = self.cache.read_blob(want, max_bytes=cap)
            if cached is not None:
                return cached
            if not self.offline:
                r, data = self.fetcher.get_bytes(asset.url, max_bytes=cap, headers={"Accept-Encoding": "identity"})
                if hashlib.sha256(data).hexdigest() == want:
                    self.cache.put_http_body(asset.url, data, etag=r.headers.get("etag"),
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
            entry = self.cache.http_entry(asset.url)
            sha256 = entry.sha256 if entry is not None else None
        path = self.cache.find_blob(sha256.lower(), size=size, rehash=rehash) if sha256 else None
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
    import base64

    from superfluid.runtime.redact import split_userinfo

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
    (``_network``: the standard library's for this machine), else ``RequestsFetcher``."""
    if urlsplit(url).scheme == "file":
        return FileFetcher(config)
    clean, credential = basic_credential(url)
    origins = [clean] if plain_http else []
    if environ is None:
        return RequestsFetcher(config, plain_http_origins=origins, credential=credential)
    return _network(clean, environ, config or FetchConfig(), plain_http_origins=origins, credential=credential)


def source_for(
    *,
    mirror: str | None,
    offline: bool,
    environ: Mapping[str, str],
    config: FetchConfig | None = None,
    cache: Cache | None = None,
    fetcher: Fetcher | None = None,
    fix: str | None = None,
) -> ReleaseSource:
    """The source a command uses: ``--mirror``/``SUPERFLUID_MIRROR`` if named, else GitHub
    (``SUPERFLUID_GITHUB_API``, ``GH_TOKEN``/``GITHUB_TOKEN``); with ``offline`` the cache alone
    (a directory mirror is read in place, which opens no connection).

    Args:
        mirror: ``--mirror`` as given, or ``None`` (then ``SUPERFLUID_MIRROR``; empty is unset).
        offline: ``--offline``.
        environ: the environment the face read (never ``os.environ`` implicitly).
        config: limits (default ``FetchConfig()``).
        cache: the cache (default ``$SUPERFLUID_HOME/cache``).
        fetcher: the network seam for online sources (default ``RequestsFetcher``; tests inject).
        fix: the command that fills the cache, quoted when ``offline`` lacks something.

    Raises:
        UsageError: ``--mirror`` (or ``SUPERFLUID_MIRROR``, named as such) is neither an http(s) URL
            nor a directory.
    """
    config = config or (fetcher.config if fetcher is not None else FetchConfig())
    cache = cache or Cache.for_home(_home.home(environ))
    named_by = "--mirror" if mirror else "SUPERFLUID_MIRROR"
    mirror = mirror or environ.get("SUPERFLUID_MIRROR") or None
    if mirror and mirror[:6].lower() == "oci://":  # a registry (installer/sources/oci/source.py), imported only then
        from superfluid.installer.sources.oci.source import oci_source

        try:
            return oci_source(mirror, named_by=named_by, offline=offline, environ=environ, config=config,
                              cache=cache, fix=fix)
        except ValueError as e:
            raise UsageError(str(e), fix="name a registry repository: oci://HOST[:PORT]/REPO") from e
    if mirror:
        try:
            root = mirror_root_url(mirror, named_by=named_by)
        except ValueError as e:
            fix = ("give --mirror an http(s):// URL or an existing directory" if named_by == "--mirror" else
                   "set SUPERFLUID_MIRROR to an http(s):// URL or an existing directory, or unset it")
            from superfluid.runtime.redact import redact_text

            raise UsageError(redact_text(str(e)), fix=fix) from e
        if root.startswith("file:"):
            local = FileFetcher(config)
            return MirrorSource(Mirror(root, local, cache), cache, local)
        # a `user:password@` leaves the URL here: sent to the mirror's origin as a credential, never
        # kept in a receipt, a cache entry or a message (their URLs are the clean root's)
        root, credential = basic_credential(root)
        if offline:
            return OfflineSource(Mirror(root, NoNetworkFetcher(config), cache, offline=True), cache, fix=fix)
        if fetcher is not None and credential is not None and fetcher.credential is None:
            fetcher.credential = credential
        net = fetcher or _network(root, environ, config, plain_http_origins=[root], credential=credential)
        return MirrorSource(Mirror(root, net, cache), cache, net)
    api_set = environ.get("SUPERFLUID_GITHUB_API") or ""
    api = api_set or DEFAULT_GITHUB_API
    if urlsplit(api).scheme not in ("https", "http"):
        raise UsageError(f"SUPERFLUID_GITHUB_API={api}: not an http(s) URL",
                         fix="set it to the API base, e.g. https://github.example.com/api/v3")
    token = token_from(environ)
    if offline:
        client = GitHubClient(NoNetworkFetcher(config), cache, api_base=api, offline=True)
        return OfflineSource(client, cache, fix=fix)
    net = fetcher or _network(api, environ, config, plain_http_origins=[api] if api_set else ())
    return GitHubSource(GitHubClient(net, cache, api_base=api, token=token), cache, net)


def _network(root: str, environ: Mapping[str, str], config: FetchConfig, *, plain_http_origins: Sequence[str],
             credential: Credential | None = None) -> Fetcher:
    """The fetcher for a source at ``root``: the standard library's for plain ``http://`` to this
    machine when it serves it as ``requests`` would (``loopback_fetcher.serves``: no proxy named),
    so that reading a local mirror does not import ``requests``; else ``RequestsFetcher``."""
    from superfluid.installer.transport.loopback import LoopbackFetcher, serves

    kind = LoopbackFetcher if serves(root, environ) else RequestsFetcher
    return kind(config, plain_http_origins=plain_http_origins, credential=credential)
