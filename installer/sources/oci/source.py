"""``--mirror oci://HOST/REPO``: an OCI registry as a release source, checked as any mirror is: its
listings in a mirror's layout below ``oci://HOST/REPO/`` (``OciListing``), each file fetched as the
registry's blob of the digest the caller expects (``client.BlobFetcher``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, ProvenanceRefused, ReleaseNotFound
from superfluid.installer.settings import Settings
from superfluid.installer.sources.bundles import BUNDLE_MAX, BUNDLE_TYPE, BUNDLES_EXAMINED, Bundles, Found, too_large
from superfluid.installer.sources.mirror import Mirror, listing_path
from superfluid.installer.sources.oci.client import Registry, registry_for
from superfluid.installer.sources.oci.ref import (
    Layer,
    OciRef,
    Referrer,
    asset_manifest,
    is_oci,
    parse_ref,
    ref_of_url,
)
from superfluid.installer.sources.release import Asset, Release, tagged
from superfluid.installer.sources.release_source import ListedSource, OfflineSource, ReleaseSource
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import NoNetworkFetcher
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = ["OciListing", "oci_source", "registry_source", "locked_source", "Locked"]


class Locked(Protocol):
    """A file a lock names (``fleet.lockfile.LockedFile``): its mirror path, URL and digest."""

    @property
    def path(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def sha256(self) -> str: ...


class OciListing:
    """The listings and file URLs of a registry repository: a mirror's layout (``Mirror``) below
    ``oci://HOST/REPO/``, read through a fetcher of its files (``Registry.fetcher``).

    Args:
        ref: the registry and repository.
        fetcher: the fetcher of the repository's files (a ``NoNetworkFetcher`` offline).
        cache: where conditional-request state and listing bodies are kept.
        offline: answer from the cache only.
    """

    def __init__(self, ref: OciRef, fetcher: Fetcher, cache: Cache, *, offline: bool = False,
                 registry: Registry | None = None) -> None:
        self.ref = ref
        self.layout = Mirror(ref.root, fetcher, cache, offline=offline)
        self.registry = registry

    @property
    def warnings(self) -> list[str]:
        return self.layout.warnings

    def describe(self) -> str:
        return self.ref.describe()

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        return self.layout.asset_url(repo, tag, name)

    def releases(self, repo: str) -> list[Release]:
        """The releases the registry's listing of ``repo`` holds; each listed digest is the blob
        its file is fetched as.

        Raises:
            ReleaseNotFound: the registry holds no listing of ``repo`` (nothing was pushed for it).
            BadFile, OfflineMissing, DownloadError: as ``Mirror.listed``.
        """
        try:
            return self.layout.listed(repo)
        except DownloadError as e:
            if e.status != 404:
                raise
            raise ReleaseNotFound(repo, f"listing {listing_path(repo)}", where=self.ref.describe(),
                                  advice=f"push a lock that names it into {self.ref.root.rstrip('/')} (mirror "
                                         "push)") from None

    def release(self, repo: str, tag: str) -> Release:
        """The published release ``tag`` from the registry's listing.

        Raises:
            ReleaseNotFound: the listing has no published release ``tag``.
        """
        found = tagged(self.releases(repo), tag)
        if found is None:
            raise ReleaseNotFound(repo, f"release {tag}", where=self.layout.root)
        return found


    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        """The Sigstore bundles that refer to ``asset``'s own manifest (``ref.asset_manifest``, whose
        digest follows from the asset's path, digest and size) as a registry keeps referrers
        (``Registry.referrers``): the first ``BUNDLES_EXAMINED``, each manifest and blob fetched by its
        digest and checked against it (``bundles.Attested``). None offline, or for an asset whose size
        is not known.

        Raises:
            ProvenanceRefused: a referrer that is not a bundle's manifest, or a bundle too large.
            BadFile, DownloadError: as ``Registry.referrers``.
        """
        path = self.ref.path_of(asset.url)
        if self.registry is None or path is None or asset.size is None:
            return Bundles((), asset.url)
        subject = hashlib.sha256(asset_manifest(Layer(path, sha256, asset.size))).hexdigest()
        where = f"{self.ref.describe()} referrers of {path}"
        referrers = self.registry.referrers(subject, BUNDLE_TYPE)
        found = tuple(self._bundle(r, where) for r in referrers[:BUNDLES_EXAMINED])
        return Bundles(found, where, len(referrers))

    def _bundle(self, referrer: Referrer, where: str) -> Found:
        """The bundle a referrer's manifest names, fetched by its digest.

        Raises:
            ProvenanceRefused: the manifest is gone, is not that digest's, or names no bundle within
                ``BUNDLE_MAX``.
        """
        assert self.registry is not None
        named = f"{where}: sha256:{referrer.sha256}"
        got = self.registry.manifest(f"sha256:{referrer.sha256}")
        if got is None or got[1] != referrer.sha256:
            raise ProvenanceRefused(named, "bundle", "is not the manifest its referrers name")
        layers = [d for d in _layers(got[0]) if d.get("mediaType") == BUNDLE_TYPE]
        m = re.fullmatch(r"sha256:([0-9a-f]{64})", str(layers[0].get("digest"))) if layers else None
        size = layers[0].get("size") if layers else None
        if m is None or not isinstance(size, int):
            raise ProvenanceRefused(named, "bundle", f"names no {BUNDLE_TYPE} layer")
        if size > BUNDLE_MAX:
            raise too_large(named, size)
        return Found(self.registry.blob(m.group(1), max_bytes=BUNDLE_MAX), named)


def _layers(data: bytes) -> list[dict[str, object]]:
    """The layer descriptors of a manifest (checked by its digest already), as objects."""
    try:
        doc = loads(data, max_bytes=len(data) or 1)
    except UntrustedJson:
        return []
    layers = doc.get("layers") if isinstance(doc, dict) else None
    return [d for d in layers if isinstance(d, dict)] if isinstance(layers, list) else []


def registry_source(registry: Registry, cache: Cache) -> ListedSource:
    """The source of ``registry``'s repository: its listings, and each file the blob of the digest
    expected of it (``by_digest``), else of the one the registry's index names."""
    files = registry.fetcher()
    return ListedSource(OciListing(registry.ref, files, cache, registry=registry), cache, files,
                        mirror=registry.ref.root, by_digest=registry.fetcher)


def oci_source(where: str, *, named_by: str, offline: bool, settings: Settings, config: FetchConfig,
               cache: Cache, fix: Fix | None = None, fetcher: Fetcher | None = None) -> ReleaseSource:
    """The source of ``--mirror oci://HOST/REPO`` (``named_by``: ``--mirror`` or
    ``SUPERFLUID_MIRROR``; plain ``http://`` as ``config.oci_plain_http`` says); with ``offline``
    the cache alone. ``fetcher``: the fetcher that speaks to the registry (default
    ``registry_for``'s). A factory of ``choose.SCHEMES``.

    Raises:
        UsageError: ``where`` is not an ``oci://HOST/REPO`` reference.
        BadFile: the auth file is broken.
    """
    try:
        ref = parse_ref(where, plain_http=config.oci_plain_http, named_by=named_by)
    except ValueError as e:
        raise UsageError(str(e), advice="name a registry repository: oci://HOST[:PORT]/REPO") from e
    if offline:
        return OfflineSource(OciListing(ref, NoNetworkFetcher(config), cache, offline=True), cache, config=config,
                             fix=fix, mirror=ref.root)
    return registry_source(registry_for(ref, settings, config, transport=fetcher), cache)


def locked_source(root: str | None, files: Sequence[Locked], settings: Settings, *,
                  transport: Fetcher | None = None) -> ReleaseSource | None:
    """The source a ``--locked`` install fetches from when its bytes are in a registry: ``root``
    (``--mirror oci://...``), else the registry the lock's own ``oci://`` URLs name (``files``: every
    file of the engines installed); None when neither is one. Each file is fetched as the blob of its
    locked digest, which every fetch is given: no listing or index is read. ``settings.fetch``: the
    limits and ``oci_plain_http``; ``transport`` as ``oci_source``'s ``fetcher``.

    Raises:
        BadFile: the auth file is broken.
    """
    config = settings.fetch
    plain = config.oci_plain_http
    ref = parse_ref(root, plain_http=plain) if root is not None and is_oci(root) else None
    if ref is None and root is None:
        ref = next((r for f in files if (r := ref_of_url(f.url, plain_http=plain))), None)
    if ref is None:
        return None
    return registry_source(registry_for(ref, settings, config, transport=transport), Cache.for_home(settings.home))
