"""The GitHub releases client: pagination, conditional requests, tokens, rate limits (the listing's
parsing is ``test_release.py``, the conditional GET and its paging ``tests/installer/cache/test_conditional.py``).

Helpers are pure; the client runs against ``responses`` for exact transport shapes and
against the loopback release server for the integration cases SPEC §11 names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import responses

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import OfflineMissing, RateLimited, ReleaseNotFound, SizeExceeded
from superfluid.installer.sources.github import GitHubClient, check_repo, web_base_for
from superfluid.installer.transport.files import NoNetworkFetcher
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.conftest import REPO
from tests.installer.sources.release_json import asset_json, release_json
from tests.release_server import ReleaseServer
from tests.settings_from import settings_from


class TestHelpers:
    @pytest.mark.parametrize(
        ("env", "token"),
        [({"GH_TOKEN": "a", "GITHUB_TOKEN": "b"}, "a"), ({"GITHUB_TOKEN": "b"}, "b"),
         ({"GH_TOKEN": "", "GITHUB_TOKEN": "b"}, "b"), ({}, None), ({"GH_TOKEN": "  "}, None)],
    )
    def test_token_from(self, env: dict[str, str], token: str | None) -> None:
        assert settings_from(env).github_token == token

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
        responses.get(base, json=[release_json("v5"), release_json("v4")],
                      match=[responses.matchers.query_string_matcher(
            "per_page=2")], headers={"Link": f'<{base}&page=2>; rel="next"', "ETag": 'W/"p1"'})
        responses.get(f"{base}&page=2", json=[release_json("v3"), release_json("v2", draft=True)],
                      headers={"Link": f'<{base}&page=3>; rel="next"'})
        responses.get(f"{base}&page=3", json=[release_json("v1")])
        rels = self._client(tmp_path, token="tok").releases(REPO)
        assert [r.tag for r in rels] == ["v5", "v4", "v3", "v1"]
        for call in responses.calls:
            assert call.request.headers["Authorization"] == "Bearer tok"
            assert call.request.headers["Accept"] == "application/vnd.github+json"
            assert call.request.headers["X-GitHub-Api-Version"] == "2022-11-28"

    @responses.activate
    def test_a_listing_longer_than_the_page_cap_keeps_the_newest(self, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
        base = f"{API}/repos/{REPO}/releases?per_page=2"
        for page, tags in enumerate([("v5", "v4"), ("v3", "v2"), ("v1",)], start=1):
            url = base if page == 1 else f"{base}&page={page}"
            link = f'<{base}&page={page + 1}>; rel="next"'
            responses.get(url, json=[release_json(t) for t in tags], headers={"Link": link},
                          match=[responses.matchers.query_string_matcher(url.split("?")[1])])
        client = GitHubClient(RequestsFetcher(FetchConfig(retries=0, listing_per_page=2, listing_max_pages=2)),
                              Cache(tmp_path), api_base=API)
        with caplog.at_level("WARNING"):
            rels = client.releases(REPO)
        assert [r.tag for r in rels] == ["v5", "v4", "v3", "v2"] and len(responses.calls) == 2
        assert f"{base}: stopped after 2 pages (4 releases)" in caplog.text

    @responses.activate
    def test_next_link_to_another_host_is_refused(self, tmp_path: Path) -> None:
        responses.get(f"{API}/repos/{REPO}/releases", json=[release_json("v1")],
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
        responses.get(f"{API}/repos/{REPO}/releases/tags/v1", json=release_json("v1", assets=[asset_json("a")]))
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
            from superfluid.installer.transport.messages import FetchResponse

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
        source = source_for(settings_from(env, mirror=None, offline=False))
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
