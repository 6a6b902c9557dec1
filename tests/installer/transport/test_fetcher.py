"""The fetcher seam: status rules, retries, redirects with token scoping, caps, schemes, for every
method.

Unit tests through ``responses`` (the real ``RequestsFetcher`` over a mocked transport), a scripted
fetcher that answers each hop from a table and records what it was sent (``PUT``, ``POST``,
``HEAD``: the redirects a body follows, the credential across origins, caps and stalls on every
answer), and fetchers whose ``_send`` misbehaves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, DownloadStalled, RateLimited, SizeExceeded
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import Credential, FetchResponse, HttpRequest, Upload
from superfluid.installer.transport.requests_fetcher import RequestsFetcher

API = "https://api.example.test"
CRED = Credential("https://api.example.test", "Bearer s3cret")


class TestStatus:
    @responses.activate
    def test_ok_body_and_headers(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/a", body=b"hello", headers={"ETag": '"x"'})
        r, body = rf.get_bytes(f"{API}/a", max_bytes=100)
        assert (r.status, body, r.headers["etag"]) == (200, b"hello", '"x"')

    @responses.activate
    def test_404_is_not_retried(self, rf: RequestsFetcher, sleeps: list[float]) -> None:
        responses.get(f"{API}/a", status=404, json={"message": "Not Found"})
        with pytest.raises(DownloadError, match="not found .HTTP 404.: Not Found") as e:
            rf.get_bytes(f"{API}/a", max_bytes=100)
        assert e.value.status == 404 and not e.value.retryable
        assert len(responses.calls) == 1 and sleeps == []

    @responses.activate
    def test_5xx_retried_with_backoff_then_success(self, rf: RequestsFetcher, sleeps: list[float]) -> None:
        responses.get(f"{API}/a", status=502)
        responses.get(f"{API}/a", status=503)
        responses.get(f"{API}/a", body=b"ok")
        _, body = rf.get_bytes(f"{API}/a", max_bytes=100)
        assert body == b"ok" and sleeps == [0.5, 1.0]

    @responses.activate
    def test_5xx_forever_gives_up_and_says_so(self, rf: RequestsFetcher, sleeps: list[float]) -> None:
        responses.get(f"{API}/a", status=500)
        with pytest.raises(DownloadError, match=r"HTTP 500 \(gave up after 4 attempts\)") as e:
            rf.get_bytes(f"{API}/a", max_bytes=100)
        assert e.value.attempts == 4 and len(responses.calls) == 4
        assert sleeps == [0.5, 1.0, 2.0]

    @responses.activate
    def test_503_retry_after_is_honoured_within_bounds(self, rf: RequestsFetcher, sleeps: list[float]) -> None:
        responses.get(f"{API}/a", status=503, headers={"Retry-After": "7"})
        responses.get(f"{API}/a", status=503, headers={"Retry-After": "86400"})
        responses.get(f"{API}/a", body=b"ok")
        rf.get_bytes(f"{API}/a", max_bytes=100)
        assert sleeps == [7.0, 1.0]  # a day is not waited: the backoff instead

    @responses.activate
    def test_429_waits_retry_after(self, rf: RequestsFetcher, sleeps: list[float]) -> None:
        responses.get(f"{API}/a", status=429, headers={"Retry-After": "3"})
        responses.get(f"{API}/a", body=b"ok")
        _, body = rf.get_bytes(f"{API}/a", max_bytes=100)
        assert body == b"ok" and sleeps == [3.0]

    @responses.activate
    def test_rate_limit_far_away_is_reported_with_reset_time(self, rf: RequestsFetcher, sleeps: list[float]) -> None:
        reset = 1_000_000 + 23 * 60
        responses.get(f"{API}/a", status=403, json={"message": "API rate limit exceeded"},
                      headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset),
                               "X-RateLimit-Limit": "60"})
        with pytest.raises(RateLimited) as e:
            rf.get_bytes(f"{API}/a", max_bytes=100)
        text = str(e.value)
        assert "rate limit exceeded (60 requests an hour)" in text
        assert "resets at 1970-01-12 14:09:40 UTC (in 23 min)" in text
        assert "GITHUB_TOKEN" in text
        assert e.value.reset_at == reset and sleeps == [] and len(responses.calls) == 1

    @responses.activate
    def test_rate_limit_with_token_does_not_suggest_a_token(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/a", status=403, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1003600"})
        with pytest.raises(RateLimited) as e:
            rf.get_bytes(f"{API}/a", max_bytes=100, credential=CRED)
        assert "GITHUB_TOKEN" not in str(e.value) and "--mirror" in str(e.value)

    @responses.activate
    def test_plain_403_is_not_a_rate_limit(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/a", status=403, json={"message": "Resource not accessible"})
        with pytest.raises(DownloadError, match="HTTP 403: Resource not accessible") as e:
            rf.get_bytes(f"{API}/a", max_bytes=100)
        assert not isinstance(e.value, RateLimited)


class TestRedirectsAndTokens:
    @responses.activate
    def test_token_only_at_its_origin_never_along_a_redirect(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/asset", status=302, headers={"Location": "https://objects.example.test/blob?sig=1"})
        responses.get("https://objects.example.test/blob", body=b"bytes")
        _, body = rf.get_bytes(f"{API}/asset", max_bytes=100, credential=CRED)
        assert body == b"bytes"
        first, second = (c.request for c in responses.calls)
        assert first.headers["Authorization"] == "Bearer s3cret"
        assert "Authorization" not in second.headers

    @responses.activate
    def test_same_origin_redirect_keeps_the_token(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/old", status=301, headers={"Location": "/new"})
        responses.get(f"{API}/new", body=b"x")
        rf.get_bytes(f"{API}/old", max_bytes=10, credential=CRED)
        assert [c.request.headers.get("Authorization") for c in responses.calls] == ["Bearer s3cret"] * 2

    @responses.activate
    def test_a_callers_authorization_header_is_dropped(self, rf: RequestsFetcher) -> None:
        responses.get("https://elsewhere.test/x", body=b"x")
        rf.get_bytes("https://elsewhere.test/x", max_bytes=10, headers={"authorization": "Bearer leaked"})
        assert "Authorization" not in responses.calls[0].request.headers

    @responses.activate
    def test_too_many_redirects(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/loop", status=302, headers={"Location": "/loop"})
        with pytest.raises(DownloadError, match="more than 5 redirects"):
            rf.get_bytes(f"{API}/loop", max_bytes=10)

    @responses.activate
    def test_redirect_without_location(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/r", status=302)
        with pytest.raises(DownloadError, match="redirect without a Location"):
            rf.get_bytes(f"{API}/r", max_bytes=10)

    @responses.activate
    @pytest.mark.parametrize(
        "target",
        ["http://plain.example.test/x", "file:///etc/passwd", "ftp://x.test/y"],
        ids=["downgrade-to-http", "to-file", "to-ftp"],
    )
    def test_redirect_to_a_refused_scheme(self, rf: RequestsFetcher, target: str) -> None:
        responses.get(f"{API}/r", status=302, headers={"Location": target})
        with pytest.raises(DownloadError, match=r"redirected from https://api\.example\.test/r"):
            rf.get_bytes(f"{API}/r", max_bytes=10)
        assert len(responses.calls) == 1

    def test_plain_http_only_to_loopback_or_a_named_origin(self, sleeps: list[float]) -> None:
        with pytest.raises(DownloadError, match="refusing plain http://") as e:
            RequestsFetcher(FetchConfig()).open("http://mirror.example.test/x")
        assert "--mirror" in str(e.value)
        with responses.RequestsMock() as mock:
            mock.get("http://mirror.example.test/x", body=b"ok")
            f = RequestsFetcher(FetchConfig(), plain_http_origins=["http://mirror.example.test/"])
            assert f.get_bytes("http://mirror.example.test/x", max_bytes=10)[1] == b"ok"


class TestCaps:
    @responses.activate
    def test_content_length_over_the_cap_is_refused_before_reading(self, rf: RequestsFetcher) -> None:
        responses.get(f"{API}/big", body=b"x" * 100)
        with pytest.raises(SizeExceeded, match="more than 10 bytes") as e:
            rf.get_bytes(f"{API}/big", max_bytes=10)
        assert (e.value.limit, e.value.got) == (10, 100) and not e.value.retryable

    def test_a_body_longer_than_announced_is_cut_at_the_cap(self) -> None:
        class Liar(Fetcher):
            def _send(self, request: HttpRequest) -> FetchResponse:
                return FetchResponse(request.url, 200, {}, iter([b"a" * 8, b"b" * 8, b"c" * 8]))

        with pytest.raises(SizeExceeded) as e:
            Liar().get_bytes("https://x.test/", max_bytes=10)
        assert e.value.got == 16


class TestStall:
    def test_a_trickle_is_a_stall(self) -> None:
        class Trickle(Fetcher):
            def _send(self, request: HttpRequest) -> FetchResponse:
                def body() -> Iterator[bytes]:
                    while True:
                        time.sleep(0.05)
                        yield b"x"

                return FetchResponse(request.url, 200, {}, body())

        f = Trickle(FetchConfig(retries=0, stall_timeout=0.3, stall_min_bytes=100))
        with pytest.raises(DownloadStalled, match=r"only \d bytes in 0.3 s after \d+ bytes \(stall timeout\)"):
            f.get_bytes("https://x.test/", max_bytes=1000)

    def test_slow_but_steady_is_not_a_stall(self) -> None:
        class Steady(Fetcher):
            def _send(self, request: HttpRequest) -> FetchResponse:
                def body() -> Iterator[bytes]:
                    for _ in range(12):
                        time.sleep(0.05)
                        yield b"x" * 100

                return FetchResponse(request.url, 200, {}, body())

        f = Steady(FetchConfig(retries=0, stall_timeout=0.2, stall_min_bytes=100))
        assert len(f.get_bytes("https://x.test/", max_bytes=10_000)[1]) == 1200


class TestWrapping:
    def test_anything_an_implementation_raises_becomes_a_download_error(self) -> None:
        class Broken(Fetcher):
            def _send(self, request: HttpRequest) -> FetchResponse:
                raise ValueError("boom")

        with pytest.raises(DownloadError, match="request failed: boom") as e:
            Broken(FetchConfig(retries=0)).get_bytes("https://x.test/", max_bytes=10)
        assert not e.value.retryable

    def test_os_errors_in_the_body_are_retryable(self) -> None:
        calls = []

        class Flaky(Fetcher):
            def _send(self, request: HttpRequest) -> FetchResponse:
                calls.append(request.url)

                def body() -> Iterator[bytes]:
                    yield b"par"
                    if len(calls) == 1:
                        raise ConnectionResetError("reset by peer")
                    yield b"tial"

                return FetchResponse(request.url, 200, {}, body())

        f = Flaky(FetchConfig(backoff_base=0), sleep=lambda s: None)
        assert f.get_bytes("https://x.test/", max_bytes=100)[1] == b"partial"
        assert len(calls) == 2

    def test_counts_requests(self) -> None:
        class One(Fetcher):
            def _send(self, request: HttpRequest) -> FetchResponse:
                return FetchResponse(request.url, 200, {}, iter([b"x"]))

        f = One()
        f.get_bytes("https://x.test/", max_bytes=1)
        f.get_bytes("https://x.test/", max_bytes=1)
        assert f.requests_made == 2


class _Scripted(Fetcher):
    """Answers each hop from ``answers`` (URL -> status, headers, body chunks) and records the
    requests it was sent, with their bodies read whole."""

    def __init__(self, answers: dict[str, tuple[int, dict[str, str], Iterator[bytes] | list[bytes]]],
                 **kwargs: object) -> None:
        super().__init__(FetchConfig(retries=0, stall_timeout=0.3, stall_min_bytes=100), **kwargs)  # type: ignore[arg-type]
        self.answers = answers
        self.sent: list[tuple[str, str, dict[str, str], bytes | None]] = []

    def _send(self, request: HttpRequest) -> FetchResponse:
        body = request.body
        data = body if isinstance(body, bytes) or body is None else body.read()
        self.sent.append((request.method, request.url, dict(request.headers), data))
        status, headers, chunks = self.answers[request.url]
        return FetchResponse(request.url, status, headers, iter(chunks))


class TestMethods:
    def test_a_put_follows_a_307_with_its_body_and_without_the_credential_elsewhere(self) -> None:
        f = _Scripted({f"{API}/up": (307, {"location": "https://store.example.test/up?sig=1"}, []),
                       "https://store.example.test/up?sig=1": (201, {}, [])})
        with f.request("PUT", f"{API}/up", {"Content-Length": "4"}, body=b"data", credential=CRED) as r:
            assert r.status == 201
        assert [(m, u, b) for m, u, _, b in f.sent] == [("PUT", f"{API}/up", b"data"),
                                                        ("PUT", "https://store.example.test/up?sig=1", b"data")]
        assert f.sent[0][2]["Authorization"] == "Bearer s3cret" and "Authorization" not in f.sent[1][2]

    def test_an_upload_is_sent_again_whole_after_a_308(self, tmp_path: Path) -> None:
        path = tmp_path / "blob"
        path.write_bytes(b"0123456789")
        f = _Scripted({f"{API}/a": (308, {"location": "/b"}, []), f"{API}/b": (201, {}, [])})
        upload = Upload(path, 10, name="blob")
        try:
            f.request("PUT", f"{API}/a", body=upload).close()
        finally:
            upload.close()
        assert [b for *_, b in f.sent] == [b"0123456789", b"0123456789"]

    @pytest.mark.parametrize("status", [301, 302, 303])
    def test_a_request_with_a_body_does_not_follow_a_redirect_that_changes_its_method(self, status: int) -> None:
        f = _Scripted({f"{API}/up": (status, {"location": "https://elsewhere.test/"}, [])})
        with pytest.raises(DownloadError, match=f"HTTP {status}"):
            f.request("POST", f"{API}/up", body=b"x")
        assert len(f.sent) == 1

    def test_a_head_follows_redirects_and_its_length_is_not_a_body(self) -> None:
        f = _Scripted({f"{API}/blob": (302, {"location": "https://store.example.test/blob"}, []),
                       "https://store.example.test/blob": (200, {"content-length": str(10 << 30)}, [])})
        with f.request("HEAD", f"{API}/blob", max_bytes=1024, credential=CRED) as r:
            assert (r.status, r.read()) == (200, b"")
        assert [m for m, *_ in f.sent] == ["HEAD", "HEAD"] and "Authorization" not in f.sent[1][2]

    def test_an_endless_answer_to_a_post_is_cut_at_the_cap(self) -> None:
        def endless() -> Iterator[bytes]:
            while True:
                yield b"x" * 4096

        f = _Scripted({f"{API}/up": (202, {}, endless())})
        with pytest.raises(SizeExceeded) as e, f.request("POST", f"{API}/up", body=b"", max_bytes=65536) as r:
            r.read()
        assert e.value.limit == 65536

    def test_an_answer_that_trickles_is_a_stall(self) -> None:
        def trickle() -> Iterator[bytes]:
            while True:
                time.sleep(0.05)
                yield b"x"

        f = _Scripted({f"{API}/up": (201, {}, trickle())})
        started = time.monotonic()
        with pytest.raises(DownloadStalled), f.request("PUT", f"{API}/up", body=b"x", max_bytes=1 << 20) as r:
            r.read()
        assert time.monotonic() - started < 2

    def test_an_error_body_that_trickles_ends_within_the_stall_rule(self) -> None:
        def trickle() -> Iterator[bytes]:
            while True:
                time.sleep(0.05)
                yield b"x"

        f = _Scripted({f"{API}/up": (500, {}, trickle())})
        started = time.monotonic()
        with pytest.raises(DownloadError, match="HTTP 500") as e:
            f.request("PUT", f"{API}/up", body=b"x")
        assert e.value.retryable and time.monotonic() - started < 2
