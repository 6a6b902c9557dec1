"""The release listing an adapter plans from: one repository of a release source, as a ``Listing``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from superfluid.installer.errors import OfflineMissing, ReleaseNotFound
from superfluid.installer.sources.release import Asset
from superfluid.runtime.digests import api_sha256, settle_asset
from superfluid.runtime.kernel.errors import InconsistentRelease

if TYPE_CHECKING:
    from superfluid.installer.sources.release import Release
    from superfluid.installer.sources.release_source import ReleaseSource
    from superfluid.runtime.planning import AssetLike, Plan, ReleaseLike

__all__ = ["SourceListing"]


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
        """``p`` with each asset's ``.sha256`` read and its digest fixed (``digests.settle_asset``)."""

        assets = []
        for a in p.assets:
            if a.sidecar:
                rel, side = self._seen[a.sidecar]
                a = settle_asset(a, self.text(rel, side), flag=flag,  # type: ignore[arg-type]
                                 where=(self.repo, rel.tag))
            assets.append(a)
        return replace(p, assets=tuple(assets), retry=self.settle(p.retry, flag) if p.retry is not None else None)
