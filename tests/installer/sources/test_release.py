"""``installer/sources/release``: the release model and the reading of a listing's JSON: facts kept,
drafts skipped, a malformed entry skipped and named, a listing too long refused at once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from superfluid.installer.sources.release import (
    MAX_RELEASES,
    Asset,
    Release,
    parse_asset,
    parse_release,
    parse_releases,
    tagged,
)
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.conftest import REPO
from tests.installer.sources.release_json import HEX, asset_json, release_json


class TestParse:
    def test_release_facts(self) -> None:
        rel = parse_release(release_json("v0.4.0", prerelease=True, assets=[asset_json("a.tar.gz")]), where="x")
        assert (rel.tag, rel.version, rel.name, rel.prerelease, rel.draft) == (
            "v0.4.0", "0.4.0", "baseRT v0.4.0", True, False)
        assert rel.assets == (Asset("a.tar.gz", f"https://github.com/{REPO}/releases/download/v1/a.tar.gz",
                                    10, f"sha256:{HEX}"),)
        assert rel.assets[0].sha256 == HEX and rel.asset("a.tar.gz") is rel.assets[0] and rel.asset("b") is None

    @pytest.mark.parametrize(("tag", "version"), [("v0.4.0", "0.4.0"), ("b11642", "b11642"), ("V2", "2"),
                                                  ("v", "v"), ("vnext", "vnext")])
    def test_version_from_tag(self, tag: str, version: str) -> None:
        assert parse_release(release_json(tag), where="x").version == version

    def test_drafts_skipped_prereleases_kept(self) -> None:
        rels = parse_releases([release_json("v3", draft=True), release_json("v2", prerelease=True),
                               release_json("v1")], where="x")
        assert [(r.tag, r.prerelease) for r in rels] == [("v2", True), ("v1", False)]

    def test_digest_forms(self) -> None:
        upper = parse_release(release_json("v1", assets=[asset_json("a", digest="sha256:" + HEX.upper())]), where="x")
        assert upper.assets[0].digest == f"sha256:{HEX}"
        none = parse_release(release_json("v1", assets=[asset_json("a", digest=None)]), where="x")
        assert none.assets[0].sha256 is None
        other = parse_release(release_json("v1", assets=[asset_json("a", digest="sha512:abc")]), where="x")
        assert other.assets[0].sha256 is None and other.assets[0].digest == "sha512:abc"

    def test_mirror_url_replaces_the_listed_one(self) -> None:
        rel = parse_release(release_json("v1", assets=[asset_json("a")]), where="x",
                            url_for=lambda tag, name: f"https://m.test/{tag}/{name}")
        assert rel.assets[0].url == "https://m.test/v1/a"

    def test_not_an_array_is_refused(self) -> None:
        with pytest.raises(BadFile, match="expected a JSON array") as e:
            parse_releases({"tag_name": "v1"}, where="https://api/x")
        assert e.value.json_path == "$" and e.value.path == "https://api/x"

    @pytest.mark.parametrize(
        ("entry", "json_path", "fault"),
        [
            (42, "$[1]", "expected a release object"),
            ({"name": "x"}, "$[1].tag_name", "expected str, got NoneType"),
            (release_json("../../etc"), "$[1].tag_name", "not a usable tag"),
            (release_json(""), "$[1].tag_name", "not a usable tag"),
            (release_json("v1", draft="no"), "$[1].draft", "expected bool"),
            (release_json("v1", assets={"a": 1}), "$[1].assets", "expected list"),
            (release_json("v1", assets=None), "$[1].assets", "expected list, got NoneType"),
            (release_json("v1", assets=[asset_json("../evil")]), "$[1].assets[0].name", "not a usable file name"),
            (release_json("v1", assets=[asset_json("a\x00b")]), "$[1].assets[0].name", "not a usable file name"),
            (release_json("v1", assets=[asset_json("a", size="10")]), "$[1].assets[0].size", "expected int"),
            (release_json("v1", assets=[asset_json("a", size=True)]), "$[1].assets[0].size", "expected int"),
            (release_json("v1", assets=[asset_json("a", size=-1)]), "$[1].assets[0].size", "negative size"),
            (release_json("v1", assets=[asset_json("a", digest="sha256:xyz")]), "$[1].assets[0].digest", "malformed"),
            (release_json("v1", assets=[asset_json("a", browser_download_url="file:///etc/passwd")]),
             "$[1].assets[0].browser_download_url", "not an http(s) URL"),
        ],
        ids=["not-object", "no-tag", "traversal-tag", "empty-tag", "draft-type", "assets-type", "assets-null",
             "traversal-name", "nul-name", "size-string", "size-bool", "size-negative", "bad-digest", "file-url"],
    )
    def test_a_malformed_entry_is_skipped_with_a_warning_naming_it(self, entry: Any, json_path: str,
                                                                  fault: str) -> None:
        """Issue 14 item 14: one malformed release entry costs that release, never the listing, and
        never silently: the warning names the listing, the entry (its tag when it has one) and the fault."""
        warnings: list[str] = []
        rels = parse_releases([release_json("v2"), entry, release_json("v0")], where="https://api/x",
                              warn=warnings.append)
        assert [r.tag for r in rels] == ["v2", "v0"]
        assert len(warnings) == 1
        assert warnings[0].startswith("https://api/x: release ") and "skipped" in warnings[0]
        assert json_path in warnings[0] and fault in warnings[0]
        tag = entry.get("tag_name") if isinstance(entry, dict) else None
        if tag:
            assert repr(tag) in warnings[0]

    def test_without_a_listener_the_skip_is_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level("WARNING"):
            rels = parse_releases([release_json("v1", assets=None), release_json("v0")], where="https://api/x")
        assert [r.tag for r in rels] == ["v0"]
        assert "release 'v1' ($[0]) skipped: $[0].assets: expected list, got NoneType" in caplog.text

    def test_a_listing_of_more_releases_than_any_engine_has_is_refused_at_once(self) -> None:
        """Issue 36, item 5: a million entries is not a listing: refused before one is parsed."""
        with pytest.raises(BadFile, match=f"lists 1000000 releases, more than .* \\({MAX_RELEASES}\\)"):
            parse_releases([{}] * 1_000_000, where="https://api/x")
        assert len(parse_releases([release_json(f"v{i}") for i in range(MAX_RELEASES)], where="x")) == MAX_RELEASES

    def test_many_malformed_entries_are_named_twenty_then_counted(self) -> None:
        warnings: list[str] = []
        rels = parse_releases([{}] * 500 + [release_json("v1")], where="https://api/x", warn=warnings.append)
        assert [r.tag for r in rels] == ["v1"]
        assert len(warnings) == 21 and warnings[-1] == "https://api/x: 480 more malformed releases skipped"

    def test_one_release_alone_is_still_refused(self) -> None:
        with pytest.raises(BadFile, match="expected list") as e:
            parse_release(release_json("v1", assets=None), where="https://api/x/tags/v1")
        assert e.value.json_path == "$.assets"


class TestModel:
    def test_to_json_is_every_fact(self) -> None:
        asset = Asset("a", "https://m.test/a", 3, f"sha256:{HEX}")
        rel = Release(tag="v1", version="1", name="one", draft=False, prerelease=True, published_at=None,
                      assets=(asset,))
        assert rel.to_json() == {"tag": "v1", "version": "1", "name": "one", "draft": False, "prerelease": True,
                                 "published_at": None, "assets": [{"name": "a", "url": "https://m.test/a",
                                                                   "size": 3, "digest": f"sha256:{HEX}"}]}
        json.dumps(rel.to_json())

    def test_a_release_is_built_by_keyword(self) -> None:
        with pytest.raises(TypeError):
            Release("v1", "1", "one", False, False, None)  # type: ignore[misc]

    def test_an_asset_alone_takes_the_mirrors_url(self) -> None:
        asset = parse_asset(asset_json("a", browser_download_url=None), where="x", path="$",
                            url_for=lambda name: f"https://m.test/{name}")
        assert (asset.name, asset.url, asset.size) == ("a", "https://m.test/a", 10)


@pytest.mark.parametrize(("tag", "found"), [("v2", "v2"), ("v1", "v1"), ("v3", None), ("2", None)],
                         ids=["newest", "older", "absent", "not-a-prefix-match"])
def test_a_release_is_found_by_its_whole_tag(tag: str, found: str | None) -> None:
    listing = [parse_release(release_json(t), where="x") for t in ("v2", "v1")]
    got = tagged(listing, tag)
    assert (got.tag if got else None) == found

