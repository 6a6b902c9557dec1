"""``installer.listing.SourceListing``: the planning interface's ``Listing`` over a ``ReleaseSource``.
A fake source in memory; each rule a table: a small asset's text against the listing's digest, a
``.sha256`` settling its bundle's digest, an optional release that is not there."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from superfluid.installer.errors import OfflineMissing, ReleaseNotFound
from superfluid.installer.sources.listing import SourceListing
from superfluid.installer.sources.release import Asset, Release
from superfluid.runtime.kernel.errors import InconsistentRelease
from superfluid.runtime.planning import DigestConflict, Plan, PlanAsset

REPO = "owner/repo"
BUNDLE = b"the bundle's bytes"
BUNDLE_SHA = hashlib.sha256(BUNDLE).hexdigest()
OTHER_SHA = "f" * 64


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def asset(name: str, data: bytes | None = None, *, digest: str | None = None) -> Asset:
    if digest is None and data is not None:
        digest = f"sha256:{sha(data)}"
    return Asset(name, f"http://mirror.test/v1/{name}", len(data) if data is not None else None, digest)


def release(tag: str, *assets: Asset) -> Release:
    return Release(tag=tag, version=tag.lstrip("v"), name=tag, draft=False, prerelease=False, published_at=None,
                   assets=assets)


class FakeSource:
    """A ``ReleaseSource`` in memory: ``blobs`` maps a URL to the bytes ``read`` answers; a tag in
    ``missing`` raises what it maps to."""

    def __init__(self, releases: Sequence[Release], blobs: Mapping[str, bytes] | None = None, *,
                 offline: bool = False, missing: Mapping[str, type[Exception]] | None = None) -> None:
        self._releases = list(releases)
        self.blobs = dict(blobs or {})
        self.offline = offline
        self.missing = dict(missing or {})
        self.listed = 0

    def releases(self, repo: str) -> list[Release]:
        self.listed += 1
        return self._releases

    def release(self, repo: str, tag: str) -> Release:
        kind = self.missing.get(tag)
        if kind is ReleaseNotFound:
            raise ReleaseNotFound(repo, f"release {tag}", where="the fake")
        if kind is OfflineMissing:
            raise OfflineMissing(f"release {tag} of {repo}")
        return next(r for r in self._releases if r.tag == tag)

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        return f"http://mirror.test/{tag}/{name}"

    def read(self, a: Asset, *, max_bytes: int | None = None) -> bytes:
        return self.blobs[a.url]


def listing_of(*assets: Asset, blobs: Mapping[str, bytes] | None = None, **kw: object) -> SourceListing:
    return SourceListing(FakeSource([release("v1", *assets)], blobs, **kw), REPO)  # type: ignore[arg-type]


# --- text: a small asset, checked against the listing's digest ----------------------------------------

@pytest.mark.parametrize(("data", "digest", "fragment"), [
    pytest.param(b"ABI 1\n", None, None, id="digest-matches"),
    pytest.param(b"ABI 1\n", "", None, id="no-digest-listed"),
    pytest.param(b"ABI 1\n", f"sha256:{OTHER_SHA}", f"the listing's digest is {OTHER_SHA}", id="bad-digest"),
    pytest.param(b"\xff\xfe ABI", None, "is not UTF-8 text", id="not-utf8"),
    pytest.param(b"\xff\xfe ABI", f"sha256:{OTHER_SHA}", "the listing's digest", id="bad-digest-before-utf8"),
])
def test_text_is_checked_against_the_listing(data: bytes, digest: str | None, fragment: str | None) -> None:
    a = asset("abi.txt", data, digest=digest)
    listing = listing_of(a, blobs={a.url: data})
    rel = listing.releases()[0]
    if fragment is None:
        assert listing.text(rel, a) == data.decode("utf-8")
        return
    with pytest.raises(InconsistentRelease, match=fragment) as info:
        listing.text(rel, a)
    assert "abi.txt" in str(info.value)


# --- settle: the .sha256 read, the bundle's digest fixed ---------------------------------------------

def bundle_plan(*, api: str | None = BUNDLE_SHA, pin: str | None = None) -> Plan:
    a = PlanAsset(name="b.tar.gz", url="http://mirror.test/v1/b.tar.gz", sha256=None, size=len(BUNDLE),
                  digest_source="release", sidecar="http://mirror.test/v1/b.tar.gz.sha256", api_sha256=api, pin=pin)
    return Plan(id="demo", version="1", backend="cpu", assets=(a,), tested=True, chosen_by="tested", abi=None,
                why="test")


@pytest.mark.parametrize(("sidecar", "api", "pin", "flag", "want"), [
    pytest.param(f"{BUNDLE_SHA}  b.tar.gz\n", BUNDLE_SHA, None, None, ("release", ("release", "api")), id="agrees"),
    pytest.param(f"{BUNDLE_SHA}\n", None, None, None, ("release", ("release",)), id="lone-digest"),
    pytest.param(f"{BUNDLE_SHA}  b.tar.gz\n", None, BUNDLE_SHA, None, ("pin", ("pin", "release")), id="pinned"),
    pytest.param(f"{BUNDLE_SHA}  b.tar.gz\n", None, None, BUNDLE_SHA, ("flag", ("flag", "release")), id="flag"),
    pytest.param(f"{OTHER_SHA}  b.tar.gz\n", BUNDLE_SHA, None, None, InconsistentRelease, id="sidecar-vs-listing"),
    pytest.param(f"{BUNDLE_SHA}  other.tar.gz\n", None, None, None, InconsistentRelease, id="names-another-file"),
    pytest.param("not a digest\n", None, None, None, InconsistentRelease, id="no-digest-in-it"),
    pytest.param(f"{BUNDLE_SHA}  b.tar.gz\n", None, None, OTHER_SHA, DigestConflict, id="flag-disagrees"),
])
def test_settle_reads_the_sidecar(sidecar: str, api: str | None, pin: str | None, flag: str | None,
                                  want: tuple[str, tuple[str, ...]] | type[Exception]) -> None:
    side = asset("b.tar.gz.sha256", sidecar.encode())
    listing = listing_of(asset("b.tar.gz", BUNDLE), side, blobs={side.url: sidecar.encode()})
    listing.releases()
    p = bundle_plan(api=api, pin=pin)
    if isinstance(want, type):
        with pytest.raises(want):
            listing.settle(p, flag)
        return
    settled = listing.settle(p, flag)
    (a,) = settled.assets
    assert (a.sha256, a.digest_source, a.checked, a.sidecar) == (BUNDLE_SHA, want[0], want[1], None)


def test_settle_leaves_an_asset_without_sidecar_alone() -> None:
    p = bundle_plan()
    p = replace(p, assets=(replace(p.assets[0], sidecar=None, sha256=BUNDLE_SHA),))
    assert listing_of().settle(p, None) == p


def test_settle_checks_the_sidecar_against_its_listed_digest() -> None:
    text = f"{BUNDLE_SHA}  b.tar.gz\n".encode()
    side = asset("b.tar.gz.sha256", text, digest=f"sha256:{OTHER_SHA}")  # the listing says other bytes
    listing = listing_of(asset("b.tar.gz", BUNDLE), side, blobs={side.url: text})
    listing.releases()
    with pytest.raises(InconsistentRelease, match="b.tar.gz.sha256"):
        listing.settle(bundle_plan(), None)


# --- releases and release ------------------------------------------------------------------------------

def test_releases_are_listed_once() -> None:
    source = FakeSource([release("v1"), release("v2")])
    listing = SourceListing(source, REPO)  # type: ignore[arg-type]
    assert [r.tag for r in listing.releases()] == ["v1", "v2"]
    assert [r.tag for r in listing.releases()] == ["v1", "v2"]
    assert source.listed == 1


@pytest.mark.parametrize(("missing", "offline", "optional", "answer"), [
    pytest.param(None, False, False, "v1", id="published"),
    pytest.param(ReleaseNotFound, False, True, None, id="not-published-optional"),
    pytest.param(ReleaseNotFound, False, False, ReleaseNotFound, id="not-published-required"),
    pytest.param(OfflineMissing, True, True, None, id="offline-not-cached-optional"),
    pytest.param(OfflineMissing, True, False, OfflineMissing, id="offline-not-cached-required"),
    pytest.param(OfflineMissing, False, True, OfflineMissing, id="online-missing-is-no-absence"),
])
def test_release_by_tag(missing: type[Exception] | None, offline: bool, optional: bool,
                        answer: str | type[Exception] | None) -> None:
    source = FakeSource([release("v1")], offline=offline, missing={"v1": missing} if missing else None)
    listing = SourceListing(source, REPO)  # type: ignore[arg-type]
    if isinstance(answer, type):
        with pytest.raises(answer):
            listing.release("v1", optional=optional)
        return
    got = listing.release("v1", optional=optional)
    assert (got.tag if got is not None else None) == answer


def test_a_release_read_by_tag_is_remembered_for_settle() -> None:
    text = f"{BUNDLE_SHA}  b.tar.gz\n".encode()
    side = asset("b.tar.gz.sha256", text)
    listing = listing_of(asset("b.tar.gz", BUNDLE), side, blobs={side.url: text})
    listing.release("v1")  # no full listing read
    assert listing.settle(bundle_plan(), None).assets[0].sha256 == BUNDLE_SHA


def test_asset_url_is_the_sources() -> None:
    assert listing_of().asset_url("v1", "x.tar.gz") == "http://mirror.test/v1/x.tar.gz"
