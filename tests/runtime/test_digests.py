"""``runtime/digests``: which SHA-256 an asset must have and from which statements (SPEC §8.2),
the ``<asset>.sha256`` and listing digest formats, and settling an asset once its ``.sha256`` is read."""

from __future__ import annotations

import pytest

from superfluid.runtime.digests import api_sha256, expected_digest, parse_sha256_file, settle_asset
from superfluid.runtime.kernel.errors import InconsistentRelease
from superfluid.runtime.planning import DigestConflict, NotInstallable, PlanAsset

D = {c: c * 64 for c in "abcdef"}  # six distinct digests

DIGESTS = [
    # id, kwargs, expected (sha, source, checked) or (error class, fragment)
    ("pin", {"pin": D["a"]}, (D["a"], "pin", ("pin",))),
    ("sidecar-required", {"api": D["a"], "require_sidecar": True}, (NotInstallable, "publishes no x.tar.gz.sha256")),
    ("pin-and-api-agree", {"pin": D["a"], "api": D["a"]}, (D["a"], "pin", ("pin", "api"))),
    ("pin-and-flag-agree", {"pin": D["a"], "flag": D["a"]}, (D["a"], "pin", ("pin",))),
    ("flag-never-overrides-pin", {"pin": D["a"], "flag": D["b"]}, (DigestConflict, D["b"])),
    ("api-against-pin", {"pin": D["a"], "api": D["b"]}, (InconsistentRelease, D["b"])),
    ("sidecar-against-pin", {"pin": D["a"], "sidecar": D["b"]}, (InconsistentRelease, D["a"])),
    ("sidecar-and-api", {"sidecar": D["a"], "api": D["a"]}, (D["a"], "release", ("release", "api"))),
    ("sidecar-alone", {"sidecar": D["a"]}, (D["a"], "release", ("release",))),
    ("sidecar-against-api", {"sidecar": D["a"], "api": D["b"]}, (InconsistentRelease, f"{D['a']}, and the listing")),
    ("flag-and-release-agree", {"flag": D["a"], "sidecar": D["a"], "api": D["a"]},
     (D["a"], "flag", ("flag", "release", "api"))),
    ("flag-against-sidecar", {"flag": D["a"], "sidecar": D["b"]}, (DigestConflict, D["b"])),
    ("flag-against-api", {"flag": D["a"], "api": D["b"]}, (DigestConflict, "the listing's digest")),
    ("flag-alone", {"flag": D["a"]}, (D["a"], "flag", ("flag",))),
    ("api-alone", {"api": D["a"]}, (D["a"], "api", ("api",))),
    ("pending-sidecar", {"api": D["a"], "sidecar_pending": True}, (D["a"], "release", ("api",))),
    ("remote-without-digest", {}, (NotInstallable, "no SHA-256 to check it against")),
    ("local-without-digest", {"local": True}, (None, "computed", ())),
]


@pytest.mark.parametrize("kwargs,expected", [c[1:] for c in DIGESTS], ids=[c[0] for c in DIGESTS])
def test_expected_digest(kwargs: dict, expected: tuple) -> None:
    if isinstance(expected[0], type):
        with pytest.raises(expected[0]) as caught:
            expected_digest("x.tar.gz", **kwargs)
        assert expected[1] in str(caught.value)
    else:
        assert expected_digest("x.tar.gz", **kwargs) == expected




SHA_FILES = [
    ("sha256sum", f"{D['a']}  x.tar.gz\n", D["a"]),
    ("binary-star", f"{D['a']} *x.tar.gz\n", D["a"]),
    ("lone-digest", f"{D['a']}\n", D["a"]),
    ("upper-case", f"{D['a'].upper()}  x.tar.gz\n", D["a"]),
    ("other-file", f"{D['a']}  y.tar.gz\n", "digest of 'y.tar.gz'"),
    ("short", "abc  x.tar.gz\n", "holds no SHA-256"),
    ("empty", "", "holds no SHA-256"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in SHA_FILES], ids=[c[0] for c in SHA_FILES])
def test_parse_sha256_file(text: str, expected: str) -> None:
    if len(expected) == 64:
        assert parse_sha256_file("r", "t", "x.tar.gz", text) == expected
    else:
        with pytest.raises(InconsistentRelease, match=expected):
            parse_sha256_file("r", "t", "x.tar.gz", text)


@pytest.mark.parametrize("digest,expected", [
    ("sha256:" + D["a"], D["a"]), ("SHA256:" + D["a"].upper(), D["a"]), (D["a"], D["a"]),
    ("sha512:" + D["a"], None), (None, None), ("sha256:zz", None),
])
def test_api_sha256(digest: str | None, expected: str | None) -> None:
    assert api_sha256(digest) == expected


def _asset(url: str = "https://x.test/v1/x.tar.gz", **over: object) -> PlanAsset:
    fields: dict[str, object] = {"name": "x.tar.gz", "url": url, "sha256": None, "size": 3, "digest_source": "release",
                                 "sidecar": url + ".sha256"}
    fields.update(over)
    return PlanAsset(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("over", "text", "flag", "want"), [
    pytest.param({}, f"{D['a']}  x.tar.gz\n", None, (D["a"], "release", ("release",)), id="sidecar-read"),
    pytest.param({"api_sha256": D["a"]}, f"{D['a']}  x.tar.gz\n", None, (D["a"], "release", ("release", "api")),
                 id="sidecar-and-listing"),
    pytest.param({"pin": D["b"], "sidecar": None}, None, None, (D["b"], "pin", ("pin",)), id="pinned-no-sidecar"),
    pytest.param({}, f"{D['a']}  x.tar.gz\n", D["a"], (D["a"], "flag", ("flag", "release")), id="flag-agrees"),
    pytest.param({"sidecar": None, "url": "/srv/x.tar.gz"}, None, None, (None, "computed", ()), id="local-unstated"),
])
def test_settle_asset(over: dict[str, object], text: str | None, flag: str | None,
                      want: tuple[str | None, str, tuple[str, ...]]) -> None:
    settled = settle_asset(_asset(**over), text, flag=flag)  # type: ignore[arg-type]
    assert (settled.sha256, settled.digest_source, settled.checked, settled.sidecar) == (*want, None)
    assert (settled.name, settled.size) == ("x.tar.gz", 3)


@pytest.mark.parametrize(("over", "text", "flag", "error", "fragment"), [
    pytest.param({}, None, None, InconsistentRelease, "lists x.tar.gz.sha256, and it could not be read",
                 id="sidecar-unread"),
    pytest.param({}, f"{D['a']}  y.tar.gz\n", None, InconsistentRelease, "is the digest of 'y.tar.gz'",
                 id="sidecar-of-another-file"),
    pytest.param({"api_sha256": D["b"]}, f"{D['a']}  x.tar.gz\n", None, InconsistentRelease,
                 f"states {D['a']}, and the listing's digest is {D['b']}", id="sidecar-against-listing"),
    pytest.param({}, f"{D['a']}  x.tar.gz\n", D["c"], DigestConflict, D["c"], id="flag-against-sidecar"),
    pytest.param({"sidecar": None}, None, None, NotInstallable, "no SHA-256 to check it against",
                 id="remote-unstated"),
])
def test_settle_asset_refused(over: dict[str, object], text: str | None, flag: str | None, error: type[Exception],
                              fragment: str) -> None:
    with pytest.raises(error) as caught:
        settle_asset(_asset(**over), text, flag=flag, where=("basecompute/baseRT", "v1"))  # type: ignore[arg-type]
    assert fragment in str(caught.value)


def test_a_refusal_names_the_release() -> None:
    with pytest.raises(InconsistentRelease) as caught:
        parse_sha256_file("basecompute/baseRT", "v0.4.0", "x.tar.gz", "")
    assert "basecompute/baseRT" in str(caught.value) and "v0.4.0" in str(caught.value)
    assert "x.tar.gz.sha256" in str(caught.value)
