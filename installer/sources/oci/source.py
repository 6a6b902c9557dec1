"""``--mirror oci://HOST/REPO``: an OCI registry as a release source, checked as any mirror is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, ReleaseNotFound
from superfluid.installer.sources.mirror import Mirror, listing_path
from superfluid.installer.sources.oci.client import OciFetcher, fetcher_for_ref
from superfluid.installer.sources.oci.ref import OciRef, is_oci, parse_ref, ref_of_url
from superfluid.installer.sources.release_source import (
    Asset,
    Download,
    MirrorSource,
    OfflineSource,
    Release,
    ReleaseSource,
)
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import NoNetworkFetcher
from superfluid.runtime.kernel.layout import home

if TYPE_CHECKING:
    from superfluid.installer.cache.download import Progress

__all__ = ["OciMirror", "OciSource", "oci_source", "locked_source", "Locked"]


class Locked(Protocol):
    """A file a lock names (``fleet.lockfile.LockedFile``): its mirror path, URL and digest."""

    @property
    def path(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def sha256(self) -> str: ...


class OciMirror(Mirror):
    """The listings and file URLs of a registry repository: ``oci://HOST/REPO/<mirror path>``."""

    def __init__(self, ref: OciRef, fetcher: Fetcher, cache: Cache, *, offline: bool = False) -> None:
        super().__init__(ref.root, fetcher, cache, offline=offline)
        self.ref = ref

    @property
    def is_local(self) -> bool:
        return False

    def describe(self) -> str:
        return self.ref.describe()

    def releases(self, repo: str) -> list[Release]:
        """The releases the registry's listing of ``repo`` holds; each listed digest is the blob
        its file is fetched as.

        Raises:
            ReleaseNotFound: the registry holds no listing of ``repo`` (nothing was pushed for it).
            BadFile, OfflineMissing, DownloadError: as ``Mirror.releases``.
        """
        try:
            out = self._list(self.listing_url(repo), lambda tag, name: self.asset_url(repo, tag, name))
        except DownloadError as e:
            if e.status != 404:
                raise
            raise ReleaseNotFound(repo, f"listing {listing_path(repo)}", where=self.ref.describe(),
                                  fix=f"push a lock of it: `superfluid mirror push {self.ref.root.rstrip('/')} "
                                      "--lock FILE`") from None
        if isinstance(self.fetcher, OciFetcher):
            for release in out:
                for a in release.assets:
                    if a.sha256:
                        self.fetcher.learn(a.url, a.sha256)
        return out


class OciSource(MirrorSource):
    """A registry's files, each fetched as the blob of the digest the caller expects."""

    def _learn(self, url: str, sha256: str | None) -> None:
        if sha256 and isinstance(self.fetcher, OciFetcher):
            self.fetcher.learn(url, sha256)

    def asset(self, repo: str, tag: str, name: str, *, size: int | None = None, sha256: str | None = None) -> Asset:
        a = super().asset(repo, tag, name, size=size, sha256=sha256)
        self._learn(a.url, sha256)
        return a

    def fetch(
        self, asset: Asset, *, sha256: str | None, size: int | None = None, progress: Progress | None = None
    ) -> Download:
        self._learn(asset.url, sha256)
        return super().fetch(asset, sha256=sha256, size=size, progress=progress)

    def fetch_many(
        self, items: Sequence[tuple[Asset, str | None]], *, progress: Progress | None = None
    ) -> list[Download]:
        for a, sha in items:
            self._learn(a.url, sha)
        return super().fetch_many(items, progress=progress)


def oci_source(where: str, *, named_by: str, offline: bool, environ: Mapping[str, str],
               config: FetchConfig, cache: Cache, fix: str | None = None,
               transport: Fetcher | None = None) -> ReleaseSource:
    """The source of ``--mirror oci://HOST/REPO`` (``named_by``: ``--mirror`` or
    ``SUPERFLUID_MIRROR``; plain ``http://`` as ``config.oci_plain_http`` says); with ``offline``
    the cache alone. ``transport``: the fetcher that speaks to the registry (default
    ``fetcher_for_ref``'s).

    Raises:
        ValueError: ``where`` is not an ``oci://HOST/REPO`` reference.
        BadFile: the auth file is broken.
    """
    ref = parse_ref(where, plain_http=config.oci_plain_http, named_by=named_by)
    if offline:
        return OfflineSource(OciMirror(ref, NoNetworkFetcher(config), cache, offline=True), cache, fix=fix)
    net = fetcher_for_ref(ref, environ, config, transport=transport)
    return OciSource(OciMirror(ref, net, cache), cache, net)


def locked_source(root: str | None, files: Sequence[Locked], environ: Mapping[str, str],
                  config: FetchConfig | None = None, *, transport: Fetcher | None = None) -> ReleaseSource | None:
    """The source a ``--locked`` install fetches from when its bytes are in a registry: ``root``
    (``--mirror oci://...``), else the registry the lock's own ``oci://`` URLs name; None when
    neither is one. Each of ``files`` (every file of the engines installed) is the blob of its
    locked digest: no listing or index is read. ``config``: the limits and ``oci_plain_http``;
    ``transport`` as ``oci_source``'s.

    Raises:
        BadFile: the auth file is broken.
    """
    config = config or FetchConfig()
    plain = config.oci_plain_http
    ref = parse_ref(root, plain_http=plain) if root is not None and is_oci(root) else None
    if ref is None and root is None:
        ref = next((r for f in files if (r := ref_of_url(f.url, plain_http=plain))), None)
    if ref is None:
        return None
    cache = Cache.for_home(home(environ))
    net = fetcher_for_ref(ref, environ, config, transport=transport)
    for f in files:
        net.learn(f.path, f.sha256)
    return OciSource(OciMirror(ref, net, cache), cache, net)
