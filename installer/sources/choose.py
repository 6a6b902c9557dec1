"""Which release source a command reads: ``--mirror`` or ``SUPERFLUID_MIRROR`` (a URL, a folder, an
OCI registry, or a URL of a scheme a source registered in ``SCHEMES``), else GitHub; with ``--offline``
the cache alone."""

from __future__ import annotations

from typing import Protocol
from urllib.parse import urlsplit

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.settings import MIRROR_FLAG, Settings
from superfluid.installer.sources.bundles import Bundles
from superfluid.installer.sources.github import GitHubClient, web_base_for
from superfluid.installer.sources.mirror import Mirror, mirror_root_url, root_of_url, schemes_text
from superfluid.installer.sources.oci.source import oci_source
from superfluid.installer.sources.release import Asset
from superfluid.installer.sources.release_source import ListedSource, OfflineSource, ReleaseSource, basic_credential
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import FileFetcher, NoNetworkFetcher
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.redact import redact_text

__all__ = ["SCHEMES", "SourceFactory", "scheme_of", "source_for", "root_of", "mirror_root", "bundles_at"]


class SourceFactory(Protocol):
    """How a ``--mirror`` URL of one scheme becomes a source (``oci_source`` is one).

    Args:
        where: the URL as given.
        named_by: who gave it (``--mirror``, or ``SUPERFLUID_MIRROR``), for messages.
        offline: the cache alone: open no connection.
        settings: what the face settled (the registry's auth files, the GitHub token, the home).
        config: limits and settings.
        cache: the download cache.
        fix: the command that fills the cache, quoted when ``offline`` lacks something.
        fetcher: the network seam to use instead of the source's own (tests inject), or None.

    Raises:
        UsageError: ``where`` is not a URL this kind of source reads (names ``named_by``, with the fix).
    """

    def __call__(self, where: str, *, named_by: str, offline: bool, settings: Settings,
                 config: FetchConfig, cache: Cache, fix: Fix | None, fetcher: Fetcher | None) -> ReleaseSource: ...


#: the sources of ``--mirror`` URLs by scheme, besides a mirror's ``http(s)://`` and ``file://`` and a
#: directory (``Mirror``): a new kind of source is its module and one line here
SCHEMES: dict[str, SourceFactory] = {
    "oci": oci_source,  # a registry (installer/sources/oci/source.py)
}


def root_of(where: str, *, named_by: str = MIRROR_FLAG) -> str:
    """The mirror root ``where`` names (``mirror_root_url``), its message naming every scheme of ``SCHEMES``.

    Raises:
        ValueError: a URL of another scheme, or a path that is not a directory.
    """
    return mirror_root_url(where, named_by=named_by, others=tuple(SCHEMES))


def mirror_root(where: str, *, named_by: str = MIRROR_FLAG) -> str:
    """``root_of``, a mirror that is none refused as a usage error: its message redacted, its advice
    said to whoever named it (``--mirror`` or ``SUPERFLUID_MIRROR``).

    Raises:
        UsageError: a URL of no scheme a source reads, or a path that is not a directory.
    """
    try:
        return root_of(where, named_by=named_by)
    except ValueError as e:
        raise UsageError(redact_text(str(e)), advice=_mirror_advice(named_by)) from e


def _mirror_advice(named_by: str) -> str:
    """What to give instead of a mirror that is none, said to whoever named it."""
    kinds = f"an existing directory or a URL of {schemes_text(tuple(SCHEMES))}"
    return f"give --mirror {kinds}" if named_by == MIRROR_FLAG else f"set SUPERFLUID_MIRROR to {kinds}, or unset it"


def scheme_of(where: str) -> str:
    """The scheme of a ``--mirror`` value, lower case (``""`` for a path)."""
    return where.split("://", 1)[0].lower() if "://" in where else ""


def source_for(
    settings: Settings,
    *,
    cache: Cache | None = None,
    fetcher: Fetcher | None = None,
    fix: Fix | None = None,
) -> ReleaseSource:
    """The source a command uses: ``settings.mirror`` (``--mirror``/``SUPERFLUID_MIRROR``) if named (a
    scheme of ``SCHEMES`` by its factory), else GitHub (``settings.github_api``, ``github_token``); with
    ``settings.offline`` the cache alone (a directory mirror is read in place, which opens no connection).

    Args:
        settings: what the face settled from the flags and the environment; its ``fetch`` are the
            limits (``oci_plain_http`` for a registry), unless ``fetcher`` brings its own.
        cache: the cache (default the home's).
        fetcher: the network seam for online sources (default a ``RequestsFetcher``; a registry's
            requests go through it too; tests inject).
        fix: the command that fills the cache, quoted when ``offline`` lacks something.

    Raises:
        UsageError: ``--mirror`` (or ``SUPERFLUID_MIRROR``, named as such) is neither an http(s) URL
            nor a directory, nor a URL a source of ``SCHEMES`` reads.
    """
    config = fetcher.config if fetcher is not None else settings.fetch
    cache = cache or Cache.for_home(settings.home)
    mirror, named_by, offline = settings.mirror, settings.mirror_named_by, settings.offline
    factory = SCHEMES.get(scheme_of(mirror)) if mirror else None
    if mirror and factory is not None:
        return factory(mirror, named_by=named_by, offline=offline, settings=settings, config=config, cache=cache,
                       fix=fix, fetcher=fetcher)
    if mirror:
        root = mirror_root(mirror, named_by=named_by)
        if root.startswith("file:"):
            local = FileFetcher(config)
            return ListedSource(Mirror(root, local, cache), cache, local, mirror=root)
        # a `user:password@` leaves the URL here: sent to the mirror's origin as a credential, never
        # kept in a receipt, a cache entry or a message (their URLs are the clean root's)
        root, credential = basic_credential(root)
        if offline:
            return OfflineSource(Mirror(root, NoNetworkFetcher(config), cache, offline=True), cache, config=config,
                                 fix=fix, mirror=root)
        if fetcher is not None and credential is not None and fetcher.credential is None:
            fetcher.credential = credential
        net = fetcher or RequestsFetcher(config, plain_http_origins=[root], credential=credential)
        return ListedSource(Mirror(root, net, cache), cache, net, mirror=root)
    api_set = settings.github_api
    api = settings.api
    if urlsplit(api).scheme not in ("https", "http"):
        raise UsageError(f"SUPERFLUID_GITHUB_API={api}: not an http(s) URL",
                         advice="set it to the API base, e.g. https://github.example.com/api/v3")
    token = settings.github_token
    if offline:
        client = GitHubClient(NoNetworkFetcher(config), cache, api_base=api, offline=True)
        return OfflineSource(client, cache, config=config, fix=fix)
    net = fetcher or RequestsFetcher(config, plain_http_origins=[api] if api_set else ())
    return ListedSource(GitHubClient(net, cache, api_base=api, token=token), cache, net)


def bundles_at(url: str, repo: str, sha256: str, settings: Settings, *, cache: Cache | None = None) -> Bundles:
    """The Sigstore bundles of the file at ``url`` whose bytes are ``sha256``, where no source listed it
    (a lock's file, fetched from its URL): GitHub's attestations of ``repo`` for a download of GitHub's
    releases (``settings.api``'s), else the ``<file>.sigstore.json`` beside it (a mirror's URL or folder).
    ``settings.offline``: from the cache alone. An ``oci://`` file's are its registry's (the source's).

    Raises:
        ProvenanceRefused, DownloadError: as ``bundles.Attested.bundles``.
    """
    cache = cache or Cache.for_home(settings.home)
    config = settings.fetch
    asset = Asset(url.rsplit("/", 1)[-1], url, None, f"sha256:{sha256}")
    if scheme_of(url) in SCHEMES:
        return Bundles((), url)
    if scheme_of(url) == "file":
        return Mirror(url, FileFetcher(config), cache).bundles(repo, asset, sha256)
    root = root_of_url(url)
    github = root is not None and root.rstrip("/").lower() == web_base_for(settings.api).rstrip("/").lower()
    plain = ([settings.api] if settings.github_api else []) if github else [root or url]  # as source_for allows
    fetcher = NoNetworkFetcher(config) if settings.offline else RequestsFetcher(config, plain_http_origins=plain)
    try:
        if github:
            client = GitHubClient(fetcher, cache, api_base=settings.api, token=settings.github_token,
                                  offline=settings.offline)
            return client.bundles(repo, asset, sha256)
        return Mirror(root or url, fetcher, cache, offline=settings.offline).bundles(repo, asset, sha256)
    finally:
        fetcher.close()
