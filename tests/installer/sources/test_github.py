"""The GitHub releases client: parsing, pagination, conditional requests, tokens, rate limits.

Parsing and helpers are pure; the client runs against ``responses`` for exact transport shapes and
against the loopback release server for the integration cases SPEC §11 names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import responses

from superfluid.installer.cache.blobs import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import OfflineMissing, RateLimited, ReleaseNotFound, SizeExceeded
from superfluid.installer.sources.github import (
    MAX_RELEASES,
    Asset,
    GitHubClient,
    check_repo,
    parse_link_next,
    parse_release,
    parse_releases,
    token_from,
    web_base_for,
)
from superfluid.installer.transport.files import NoNetworkFetcher
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.conftest import REPO
from tests.release_server import ReleaseServer

HEX = "ab" * 32


def _release(tag: str, **kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"tag_name": tag, "name": f"baseRT {tag}", "draft": False, "prerelease": False,
                           "published_at": "2026-01-01T00:00:00Z", "assets": []}
    obj.update(kw)
    return obj


def _asset(name: str, **kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"name": name, "size": 10, "digest": f"sha256:{HEX}",
                           "browser_download_url": f"https://github.com/{REPO}/releases/download/v1/{name}"}
    obj.update(kw)
    return obj


class TestParse:
    def test_release_facts(self) -> None:
        rel = parse_release(_release("v0.4.0", prerelease=True, assets=[_asset("a.tar.gz")]), where="x")
        assert (rel.tag, rel.version, rel.name, rel.prerelease, rel.draft) == (
            "v0.4.0", "0.4.0", "baseRT v0.4.0", True, False)
        assert rel.assets == (Asset("a.tar.gz", f"https://github.com/{REPO}/releases/download/v1/a.tar.gz",
                                    10, f"sha256:{HEX}"),)
        assert rel.assets[0].sha256 == HEX and rel.asset("a.tar.gz") is rel.assets[0] and rel.asset("b") is None

    @pytest.mark.parametrize(("tag", "version"), [("v0.4.0", "0.4.0"), ("b11642", "b11642"), ("V2", "2"),
                                                  ("v", "v"), ("vnext", "vnext")])
    def test_version_from_tag(self, tag: str, version: str) -> None:
        assert parse_release(_release(tag), where="x").version == version

    def test_drafts_skipped_prereleases_kept(self) -> None:
        rels = parse_releases([_release("v3", draft=True), _release("v2", prerelease=True), _release("v1")], where="x")
        assert [(r.tag, r.prerelease) for r in rels] == [("v2", True), ("v1", False)]

    def test_digest_forms(self) -> None:
        upper = parse_release(_release("v1", assets=[_asset("a", digest="sha256:" + HEX.upper())]), where="x")
        assert upper.assets[0].digest == f"sha256:{HEX}"
        none = parse_release(_release("v1", assets=[_asset("a", digest=None)]), where="x")
        assert none.assets[0].sha256 is None
        other = parse_release(_release("v1", assets=[_asset("a", digest="sha512:abc")]), where="x")
        assert other.assets[0].sha256 is None and other.assets[0].digest == "sha512:abc"

    def test_mirror_url_replaces_the_listed_one(self) -> None:
        rel = parse_release(_release("v1", assets=[_asset("a")]), where="x",
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
            (_release("../../etc"), "$[1].tag_name", "not a usable tag"),
            (_release(""), "$[1].tag_name", "not a usable tag"),
            (_release("v1", draft="no"), "$[1].draft", "expected bool"),
            (_release("v1", assets={"a": 1}), "$[1].assets", "expected list"),
            (_release("v1", assets=None), "$[1].assets", "expected list, got NoneType"),
            (_release("v1", assets=[_asset("../evil")]), "$[1].assets[0].name", "not a usable file name"),
            (_release("v1", assets=[_asset("a\x00b")]), "$[1].assets[0].name", "not a usable file name"),
            (_release("v1", assets=[_asset("a", size="10")]), "$[1].assets[0].size", "expected int"),
            (_release("v1", assets=[_asset("a", size=True)]), "$[1].assets[0].size", "expected int"),
            (_release("v1", assets=[_asset("a", size=-1)]), "$[1].assets[0].size", "negative size"),
            (_release("v1", assets=[_asset("a", digest="sha256:xyz")]), "$[1].assets[0].digest", "malformed"),
            (_release("v1", assets=[_asset("a", browser_download_url="file:///etc/passwd")]),
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
        rels = parse_releases([_release("v2"), entry, _release("v0")], where="https://api/x", warn=warnings.append)
        assert [r.tag for r in rels] == ["v2", "v0"]
        assert len(warnings) == 1
        assert warnings[0].startswith("https://api/x: release ") and "skipped" in warnings[0]
        assert json_path in warnings[0] and fault in warnings[0]
        tag = entry.get("tag_name") if isinstance(entry, dict) else None
        if tag:
            assert repr(tag) in warnings[0]

    def test_without_a_listener_the_skip_is_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level("WARNING"):
            rels = parse_releases([_release("v1", assets=None), _release("v0")], where="https://api/x")
        assert [r.tag for r in rels] == ["v0"]
        assert "release 'v1' ($[0]) skipped: $[0].assets: expected list, got NoneType" in caplog.text

    def test_a_listing_of_more_releases_than_any_engine_has_is_refused_at_once(self) -> None:
        """Issue 36, item 5: a million entries is not a listing: refused before one is parsed."""
        with pytest.raises(BadFile, match=f"lists 1000000 releases, more than .* \\({MAX_RELEASES}\\)"):
            parse_releases([{}] * 1_000_000, where="https://api/x")
        assert len(parse_releases([_release(f"v{i}") for i in range(MAX_RELEASES)], where="x")) == MAX_RELEASES

    def test_many_malformed_entries_are_named_twenty_then_counted(self) -> None:
        warnings: list[str] = []
        rels = parse_releases([{}] * 500 + [_release("v1")], where="https://api/x", warn=warnings.append)
        assert [r.tag for r in rels] == ["v1"]
        assert len(warnings) == 21 and warnings[-1] == "https://api/x: 480 more malformed releases skipped"

    def test_one_release_alone_is_still_refused(self) -> None:
        with pytest.raises(BadFile, match="expected list") as e:
            parse_release(_release("v1", assets=None), where="https://api/x/tags/v1")
        assert e.value.json_path == "$.assets"


class TestHelpers:
    @pytest.mark.parametrize(
        ("header", "expected"),
        [
            ('<https://a/x?page=2>; rel="next", <https://a/x?page=5>; rel="last"', "https://a/x?page=2"),
            ('<https://a/x?page=1>; rel="prev", <https://a/x?page=3>; rel="next"', "https://a/x?page=3"),
            ('<https://a/x?page=1>; rel="first"', None),
            ("<https://a/x?page=2>; rel=next", "https://a/x?page=2"),
            (None, None),
            ("garbage", None),
        ],
        ids=["first", "middle", "last", "unquoted", "absent", "garbage"],
    )
    def test_link_next(self, header: str | None, expected: str | None) -> None:
        assert parse_link_next(header) == expected

    @pytest.mark.parametrize(
        ("env", "token"),
        [({"GH_TOKEN": "a", "GITHUB_TOKEN": "b"}, "a"), ({"GITHUB_TOKEN": "b"}, "b"),
         ({"GH_TOKEN": "", "GITHUB_TOKEN": "b"}, "b"), ({}, None), ({"GH_TOKEN": "  "}, None)],
    )
    def test_token_from(self, env: dict[str, str], token: str | None) -> None:
        assert token_from(env) == token

    @pytest.mark.parametrize(
        ("api", "web"),
        [("https://api.github.com", "https://github.com"), ("https://ghe.corp/api/v3", "https://ghe.corp"),
         ("http://127.0.0.1:5000", "http://127.0.0.1:5000"), ("http://127.0.0.1:5000/gh/", "http://127.0.0.1:5000/gh")],
    )
    def test_web_base(self, api: str, web: str) -> None:
        assert web_base_for(api) == web

    @pytest.mark.parametrize("repo", ["x", "a/b/c", "../b", "a/..", "a b/c", ""])
    def test_bad_repo(self, repo: str) -> None:
        with pytest.raises(ValueError, match="owner/name"):
            check_repo(repo)


API = "https://api.example.test"


class TestClientUnit:
    def _client(self, tmp_path: Path, **kw: Any) -> GitHubClient:
        return GitHubClient(RequestsFetcher(FetchConfig(retries=0, listing_per_page=2)), Cache(tmp_path),
                            api_base=API, **kw)

    @responses.activate
    def test_three_pages_with_headers(self, tmp_path: Path) -> None:
        base = f"{API}/repos/{REPO}/releases?per_page=2"
        responses.get(base, json=[_release("v5"), _release("v4")], match=[responses.matchers.query_string_matcher(
            "per_page=2")], headers={"Link": f'<{base}&page=2>; rel="next"', "ETag": 'W/"p1"'})
        responses.get(f"{base}&page=2", json=[_release("v3"), _release("v2", draft=True)],
                      headers={"Link": f'<{base}&page=3>; rel="next"'})
        responses.get(f"{base}&page=3", json=[_release("v1")])
        rels = self._client(tmp_path, token="tok").releases(REPO)
        assert [r.tag for r in rels] == ["v5", "v4", "v3", "v1"]
        for call in responses.calls:
            assert call.request.headers["Authorization"] == "Bearer tok"
            assert call.request.headers["Accept"] == "application/vnd.github+json"
            assert call.request.headers["X-GitHub-Api-Version"] == "2022-11-28"

    @responses.activate
    def test_next_link_to_another_host_is_refused(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases", json=[_release("v1")],
                      headers={"Link": '<https://evil.test/steal>; rel="next"'})
        with pytest.raises(BadFile, match="links its next page to another host"):
            self._client(tmp_path, token="tok").releases(REPO)
        assert len(responses.calls) == 1

    @responses.activate
    def test_not_json(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases", body=b"<html>captive portal</html>")
        with pytest.raises(BadFile, match="not valid JSON"):
            self._client(tmp_path).releases(REPO)

    @responses.activate
    def test_json_nested_too_deep(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases", body=b"[" * 100_000 + b"]" * 100_000)
        with pytest.raises(BadFile, match="nested too deeply"):
            self._client(tmp_path).releases(REPO)

    @responses.activate
    def test_listing_over_the_cap(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases", body=b" " * 2000 + b"[]")
        client = GitHubClient(RequestsFetcher(FetchConfig(retries=0, listing_max_bytes=1000)), Cache(tmp_path),
                              api_base=API)
        with pytest.raises(SizeExceeded):
            client.releases(REPO)

    @responses.activate
    def test_unknown_repo(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases", status=404, json={"message": "Not Found"})
        with pytest.raises(ReleaseNotFound, match=f"{REPO}: repository not found at {API}"):
            self._client(tmp_path).releases(REPO)

    @responses.activate
    def test_release_by_tag(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases/tags/v1", json=_release("v1", assets=[_asset("a")]))
        responses.get(f"{API}/repos/{REPO}/releases/tags/v9", status=404, json={"message": "Not Found"})
        client = self._client(tmp_path)
        assert client.release(REPO, "v1").assets[0].name == "a"
        with pytest.raises(ReleaseNotFound, match="release v9 not found"):
            client.release(REPO, "v9")

    def test_token_not_sent_over_plain_http_to_another_machine(self, tmp_path: Path) -> None:
        f = RequestsFetcher(FetchConfig(), plain_http_origins=["http://ghe.corp"])
        assert GitHubClient(f, Cache(tmp_path), api_base="http://ghe.corp/api/v3", token="t").credential is None
        assert GitHubClient(f, Cache(tmp_path), api_base="http://127.0.0.1:9", token="t").credential is not None


def _publish(server: ReleaseServer, n: int, **kw: Any) -> None:
    for i in range(n):
        server.add_release(REPO, f"v0.{i}.0", {f"basert-engine-linux-x64-0.{i}.0.tar.gz": bytes([i]) * 1000,
                                               "basert-engine-abi-1.txt": b"1\n"}, sha256_files=True, **kw)


class TestClientLoopback:
    def _client(self, server: ReleaseServer, home: Path, **kw: Any) -> GitHubClient:
        config = kw.pop("config", FetchConfig(listing_per_page=2, retries=1, backoff_base=0.01))
        return GitHubClient(RequestsFetcher(config), Cache.for_home(home), api_base=server.url, **kw)

    def test_pagination_over_three_pages_then_warm_costs_only_304s(self, release_server: ReleaseServer,
                                                                     home: Path) -> None:
        _publish(release_server, 5)
        client = self._client(release_server, home, token="tok")
        cold = client.releases(REPO)
        assert [r.tag for r in cold] == ["v0.4.0", "v0.3.0", "v0.2.0", "v0.1.0", "v0.0.0"]
        assert [r.status for r in release_server.log] == [200, 200, 200]
        assert [r.path.split("?")[1] for r in release_server.log] == ["per_page=2", "per_page=2&page=2",
                                                                      "per_page=2&page=3"]
        release_server.clear_log()
        warm = client.releases(REPO)
        assert warm == cold
        assert [r.status for r in release_server.log] == [304, 304, 304]
        assert all(r.header("If-None-Match", ) for r in release_server.log)

    def test_304_reply_carries_no_body(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        client = self._client(release_server, home)
        client.releases(REPO)
        sizes: list[int] = []
        orig = client.fetcher._send

        def spy(request: Any) -> Any:
            r = orig(request)
            body = list(r)
            sizes.append(sum(len(b) for b in body))
            from superfluid.installer.transport.fetcher import FetchResponse

            return FetchResponse(r.url, r.status, r.headers, iter(body))

        client.fetcher._send = spy  # type: ignore[method-assign]
        client.releases(REPO)
        assert sizes == [0]

    def test_a_changed_listing_is_fetched_again(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        client = self._client(release_server, home)
        assert [r.tag for r in client.releases(REPO)] == ["v0.0.0"]
        release_server.add_release(REPO, "v0.9.0", {"x": b"x"})
        assert [r.tag for r in client.releases(REPO)] == ["v0.9.0", "v0.0.0"]

    def test_drafts_skipped_prereleases_marked(self, release_server: ReleaseServer, home: Path) -> None:
        release_server.add_release(REPO, "v0.3.0", {"a": b"a"})
        release_server.add_release(REPO, "v0.4.0-rc1", {"a": b"b"}, prerelease=True)
        release_server.add_release(REPO, "v0.5.0", {"a": b"c"}, draft=True)
        rels = self._client(release_server, home).releases(REPO)
        assert [(r.tag, r.prerelease) for r in rels] == [("v0.4.0-rc1", True), ("v0.3.0", False)]

    def test_token_to_api_never_to_the_object_store(self, object_store_server: ReleaseServer, home: Path) -> None:
        from superfluid.installer.sources.choose import source_for

        _publish(object_store_server, 1)
        env = {"SUPERFLUID_HOME": str(home), "SUPERFLUID_GITHUB_API": object_store_server.url,
               "GITHUB_TOKEN": "s3cret-token"}
        source = source_for(mirror=None, offline=False, environ=env)
        rel = source.releases(REPO)[0]
        asset = rel.asset("basert-engine-linux-x64-0.0.0.tar.gz")
        assert asset is not None and asset.url.startswith(object_store_server.url)
        source.fetch(asset, sha256=asset.sha256)
        api = object_store_server.requests_to("/repos/")
        objects = [r for r in object_store_server.log if r.server == "objects"]
        assert api and all(r.header("Authorization") == "Bearer s3cret-token" for r in api)
        assert objects and all(r.header("Authorization") is None for r in objects)
        assert all(r.header("Authorization") is None for r in object_store_server.requests_to(f"/{REPO}/"))

    def test_api_redirect_to_another_host_drops_the_token(self, object_store_server: ReleaseServer,
                                                          home: Path) -> None:
        _publish(object_store_server, 1)
        listing = object_store_server.listing_path(REPO)
        # the API moves the listing to another origin (a renamed repository, a hostile proxy)
        object_store_server.fault(listing, "redirect", location=f"{object_store_server.objects_url}/repos/x")
        client = self._client(object_store_server, home, token="s3cret-token",
                              config=FetchConfig(retries=0))
        with pytest.raises(ReleaseNotFound):
            client.releases(REPO)
        first, second = object_store_server.log
        assert first.server == "api" and first.header("Authorization") == "Bearer s3cret-token"
        assert second.server == "objects" and second.header("Authorization") is None

    def test_rate_limit_says_when_it_resets(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        reset = int(time.time()) + 40 * 60
        release_server.set_rate_limit(0, total=60, reset_at=reset)
        with pytest.raises(RateLimited) as e:
            self._client(release_server, home).releases(REPO)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(reset))
        assert f"it resets at {stamp} (in 40 min)" in str(e.value)
        assert "60 requests an hour" in str(e.value) and e.value.status == 403
        assert len(release_server.log) == 1  # an hour away: reported, not waited for

    def test_rate_limit_soon_is_waited_for(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        release_server.fault(release_server.listing_path(REPO), "rate_limit", status=429, seconds=1)
        rels = self._client(release_server, home).releases(REPO)
        assert rels and [r.status for r in release_server.log] == [429, 200]
        assert release_server.log[1].time - release_server.log[0].time >= 1.0

    def test_release_by_tag(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 2)
        release_server.add_release(REPO, "v0.9.0", {"a": b"a"}, draft=True)
        client = self._client(release_server, home)
        assert client.release(REPO, "v0.1.0").asset("basert-engine-abi-1.txt") is not None
        with pytest.raises(ReleaseNotFound):
            client.release(REPO, "v0.9.0")
        assert client.release(REPO, "v0.1.0") == client.release(REPO, "v0.1.0")
        assert release_server.log[-1].status == 304

    def test_offline_client_reads_the_cache_and_never_connects(self, release_server: ReleaseServer, home: Path,
                                                               no_sockets: list[object]) -> None:
        _publish(release_server, 3)
        cache = Cache.for_home(home)
        config = FetchConfig(listing_per_page=2)
        with pytest.raises(OfflineMissing, match="release listing"):
            GitHubClient(NoNetworkFetcher(config), cache, api_base=release_server.url, offline=True).releases(REPO)
        assert no_sockets == [] and release_server.log == []

    def test_listing_json_is_what_the_server_says(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        rel = self._client(release_server, home).releases(REPO)[0]
        raw = release_server.releases_json(REPO)[0]
        assert rel.tag == raw["tag_name"] and len(rel.assets) == len(raw["assets"])
        for a, r in zip(rel.assets, raw["assets"], strict=True):
            assert (a.name, a.url, a.size, a.digest) == (r["name"], r["browser_download_url"], r["size"], r["digest"])
        json.dumps([a.to_json() for a in rel.assets])


class TestListingFaults:
    def _client(self, server: ReleaseServer, home: Path) -> GitHubClient:
        return GitHubClient(RequestsFetcher(FetchConfig(listing_per_page=2, retries=2, backoff_base=0.01)),
                            Cache.for_home(home), api_base=server.url)

    def test_listing_cut_midway_is_fetched_again(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 3)
        release_server.fault(release_server.listing_path(REPO), "cut", after=50)
        assert len(self._client(release_server, home).releases(REPO)) == 3
        assert [r.status for r in release_server.log][:2] == [200, 200]  # cut, then whole

    def test_listing_5xx_then_success(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        release_server.fault(release_server.listing_path(REPO), "status", status=502, times=2)
        assert len(self._client(release_server, home).releases(REPO)) == 1
        assert [r.status for r in release_server.log] == [502, 502, 200]

    def test_garbled_listing_is_a_bad_file_and_not_cached(self, release_server: ReleaseServer, home: Path) -> None:
        _publish(release_server, 1)
        release_server.fault(release_server.listing_path(REPO), "wrong_bytes")
        client = self._client(release_server, home)
        with pytest.raises(BadFile, match="not valid JSON"):
            client.releases(REPO)
        assert len(client.releases(REPO)) == 1
        assert [r.status for r in release_server.log] == [200, 200]  # the garbled page was not revalidated
