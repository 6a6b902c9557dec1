"""``installer/cache/conditional``: a GET asked conditionally from the HTTP cache (a 304 answers the
kept body, offline answers it without a connection) and the pages a ``Link: rel="next"`` header chains."""

from __future__ import annotations

from pathlib import Path

import pytest
import responses
from responses import matchers

from superfluid.installer.cache.conditional import cached_get, linked_pages, parse_link_next
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, OfflineMissing
from superfluid.installer.transport.files import NoNetworkFetcher
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.kernel.errors import BadFile

URL = "https://api.example.test/listing"


def _fetcher() -> RequestsFetcher:
    return RequestsFetcher(FetchConfig(retries=0))


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
def test_link_next(header: str | None, expected: str | None) -> None:
    assert parse_link_next(header) == expected


class TestCachedGet:
    @responses.activate
    def test_a_second_get_is_conditional_and_a_304_answers_the_kept_body(self, tmp_path: Path) -> None:
        cache = Cache(tmp_path)
        responses.get(URL, body=b"[1]", headers={"ETag": 'W/"e1"', "Last-Modified": "Mon, 01 Jan 2026 00:00:00 GMT",
                                                 "Link": f'<{URL}?page=2>; rel="next"'})
        first = cached_get(URL, fetcher=_fetcher(), cache=cache, max_bytes=1000)
        assert (first.url, first.body, first.status, first.link_next) == (URL, b"[1]", 200, f"{URL}?page=2")
        assert first.entry is not None and first.entry.etag == 'W/"e1"'
        responses.replace(responses.GET, URL, status=304, body=b"", match=[matchers.header_matcher(
            {"If-None-Match": 'W/"e1"', "If-Modified-Since": "Mon, 01 Jan 2026 00:00:00 GMT"})])
        again = cached_get(URL, fetcher=_fetcher(), cache=cache, max_bytes=1000)
        assert (again.body, again.status, again.link_next) == (b"[1]", 304, f"{URL}?page=2")

    @responses.activate
    def test_a_changed_body_replaces_the_kept_one(self, tmp_path: Path) -> None:
        cache = Cache(tmp_path)
        responses.get(URL, body=b"[1]", headers={"ETag": '"e1"'})
        cached_get(URL, fetcher=_fetcher(), cache=cache, max_bytes=1000)
        responses.replace(responses.GET, URL, body=b"[2]", headers={"ETag": '"e2"'})
        got = cached_get(URL, fetcher=_fetcher(), cache=cache, max_bytes=1000)
        assert (got.body, got.status, got.link_next) == (b"[2]", 200, None)
        entry = cache.http.http_entry(URL)
        assert entry is not None and entry.etag == '"e2"'

    @responses.activate
    def test_a_304_to_a_plain_get_is_a_download_error(self, tmp_path: Path) -> None:
        responses.get(URL, status=304, body=b"")
        with pytest.raises(DownloadError, match="HTTP 304 to a request that was not conditional"):
            cached_get(URL, fetcher=_fetcher(), cache=Cache(tmp_path), max_bytes=1000)

    @responses.activate
    def test_offline_answers_the_kept_body_without_a_request(self, tmp_path: Path) -> None:
        cache = Cache(tmp_path)
        responses.get(URL, body=b"[1]", headers={"ETag": '"e1"'})
        cached_get(URL, fetcher=_fetcher(), cache=cache, max_bytes=1000)
        got = cached_get(URL, fetcher=NoNetworkFetcher(FetchConfig()), cache=cache, max_bytes=1000, offline=True)
        assert (got.body, got.status) == (b"[1]", 0) and len(responses.calls) == 1

    def test_offline_with_nothing_kept_names_what_is_missing(self, tmp_path: Path) -> None:
        with pytest.raises(OfflineMissing, match="release listing"):
            cached_get(URL, fetcher=NoNetworkFetcher(FetchConfig()), cache=Cache(tmp_path), max_bytes=1000,
                       offline=True, what="release listing")


class TestLinkedPages:
    def _pages(self, tmp_path: Path, max_pages: int = 10) -> list[bytes]:
        return [p.body for p in linked_pages(URL, fetcher=_fetcher(), cache=Cache(tmp_path), max_pages=max_pages,
                                             max_bytes=1000)]

    @staticmethod
    def _serve(n: int, last_link: str | None = None) -> None:
        for i in range(1, n + 1):
            url = URL if i == 1 else f"{URL}?page={i}"
            nxt = f"{URL}?page={i + 1}" if i < n else last_link
            responses.get(url, body=f"[{i}]".encode(), match=[matchers.query_string_matcher(
                "" if i == 1 else f"page={i}")], headers={"Link": f'<{nxt}>; rel="next"'} if nxt else {})

    @responses.activate
    def test_every_page_in_order(self, tmp_path: Path) -> None:
        self._serve(3)
        assert self._pages(tmp_path) == [b"[1]", b"[2]", b"[3]"]

    @responses.activate
    def test_at_most_max_pages(self, tmp_path: Path) -> None:
        self._serve(3)
        assert self._pages(tmp_path, max_pages=2) == [b"[1]", b"[2]"] and len(responses.calls) == 2

    @responses.activate
    def test_a_next_link_to_another_host_is_refused_after_its_page(self, tmp_path: Path) -> None:
        self._serve(1, last_link="https://evil.test/steal")
        pages = linked_pages(URL, fetcher=_fetcher(), cache=Cache(tmp_path), max_pages=10, max_bytes=1000)
        assert next(pages).body == b"[1]"
        with pytest.raises(BadFile, match="page 1 links its next page to another host: https://evil.test/steal"):
            next(pages)
        assert len(responses.calls) == 1

    @responses.activate
    def test_the_next_page_is_asked_only_when_taken(self, tmp_path: Path) -> None:
        self._serve(3)
        pages = linked_pages(URL, fetcher=_fetcher(), cache=Cache(tmp_path), max_pages=10, max_bytes=1000)
        assert next(pages).body == b"[1]" and len(responses.calls) == 1
