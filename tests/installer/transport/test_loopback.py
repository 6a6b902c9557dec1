"""``installer/transport/loopback.py``: plain ``http://`` to this machine through ``http.client``,
answering as ``RequestsFetcher`` does (the same bytes, statuses, gzip when asked, a cut body as a
retryable error), chosen only where requests would not go through a proxy."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError
from superfluid.installer.transport.loopback import LoopbackFetcher, serves
from superfluid.installer.transport.messages import Upload
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from tests.release_server import ReleaseServer
from tests.settings_from import settings_from

REPO, TAG, NAME = "acme/engine", "v1", "engine.tar.gz"
DATA = bytes(range(256)) * 4096  # 1 MiB


@pytest.mark.parametrize(("url", "environ", "want"), [
    ("http://127.0.0.1:8080/mirror/", {}, True),
    ("http://localhost/mirror/", {"HTTPS_PROXY": "http://proxy:3128"}, True),  # https's proxy: not http's
    ("http://[::1]:9/", {"NO_PROXY": "*"}, True),
    ("http://127.0.0.1:8080/", {"HTTP_PROXY": "http://proxy:3128"}, False),
    ("http://127.0.0.1:8080/", {"all_proxy": "socks5://proxy:1080"}, False),
    ("https://127.0.0.1:8443/", {}, False),  # TLS: requests'
    ("http://mirror.example/", {}, False),
])
def test_serves_plain_http_to_loopback_without_a_proxy(url: str, environ: dict[str, str], want: bool) -> None:
    assert serves(url, proxied=settings_from(environ).proxied) is want


@pytest.fixture
def tagged(release_server: ReleaseServer) -> ReleaseServer:
    release_server.add_release(REPO, TAG, {NAME: DATA})
    return release_server


def test_the_same_answers_as_requests(tagged: ReleaseServer) -> None:
    url = tagged.download_url(REPO, TAG, NAME)
    listing = tagged.url + tagged.listing_path(REPO)
    for fetcher in (LoopbackFetcher(FetchConfig()), RequestsFetcher(FetchConfig())):
        try:
            _, body = fetcher.get_bytes(url, max_bytes=len(DATA), headers={"Accept-Encoding": "identity"})
            assert body == DATA
            with fetcher.open(url, {"Range": "bytes=1000-", "Accept-Encoding": "identity"}) as r:
                assert (r.status, r.read()) == (206, DATA[1000:])
            # the listing is served gzipped when asked (tests/release_server.py): decoded, as requests does
            with fetcher.open(listing, {"Accept-Encoding": "gzip"}, max_bytes=1 << 20) as r:
                assert r.headers.get("content-encoding") == "gzip"
                assert json.loads(r.read())[0]["tag_name"] == TAG
            with pytest.raises(DownloadError, match="HTTP 404"):
                fetcher.get_bytes(tagged.url + "/nothing-here", max_bytes=10)
        finally:
            fetcher.close()


def test_one_connection_serves_many_requests(tagged: ReleaseServer) -> None:
    url = tagged.download_url(REPO, TAG, NAME)
    fetcher = LoopbackFetcher(FetchConfig())
    for _ in range(3):
        assert fetcher.get_bytes(url, max_bytes=len(DATA))[1] == DATA
    assert fetcher.requests_made == 3 and len(fetcher._local.connections) == 1
    fetcher.close()


def test_a_cut_body_is_a_retryable_error_naming_the_bytes_received(tagged: ReleaseServer) -> None:
    path = tagged.download_path(REPO, TAG, NAME)
    tagged.fault(path, "cut", after=4096)
    fetcher = LoopbackFetcher(FetchConfig())
    with fetcher.open(tagged.url + path) as r, pytest.raises(DownloadError, match="after 4096 bytes") as caught:
        r.read()
    assert caught.value.retryable
    fetcher.close()


def test_close_closes_the_connections_of_every_thread(tagged: ReleaseServer) -> None:
    """A download pool's threads each open their own connection: ``close`` reaches them all."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    url = tagged.download_url(REPO, TAG, NAME)
    fetcher = LoopbackFetcher(FetchConfig())
    together = threading.Barrier(3, timeout=30)  # three threads at once: three connections

    def fetch(_: int) -> None:
        fetcher.get_bytes(url, max_bytes=len(DATA))
        together.wait()

    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(fetch, range(3)))
        conns = list(fetcher._opened)
        assert len(conns) == 3 and all(c.sock is not None for c in conns)
        fetcher.close()  # from this thread, while the pool's threads still live
        assert all(c.sock is None for c in conns)


def test_every_method_with_its_body_on_one_kept_connection(tmp_path: Path) -> None:
    """``HEAD``, ``POST`` and a ``PUT`` of an ``Upload``: sent as they are, answered, one connection."""
    seen: list[tuple[str, str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, extra: dict[str, str]) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.append((self.command, self.path, self.rfile.read(length) if length else b""))
            self.send_response(status)
            for k, v in {"Content-Length": "0", **extra}.items():
                self.send_header(k, v)
            self.end_headers()

        def do_HEAD(self) -> None:  # noqa: N802 - http.server's names
            self._answer(200, {"Content-Length": "123456789"})

        def do_POST(self) -> None:  # noqa: N802
            self._answer(202, {"Location": "/upload/1"})

        def do_PUT(self) -> None:  # noqa: N802
            self._answer(201, {})

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    blob = tmp_path / "blob"
    blob.write_bytes(b"y" * 100_000)
    fetcher = LoopbackFetcher(FetchConfig())
    try:
        with fetcher.request("HEAD", f"{base}/blob", max_bytes=1024) as r:
            assert (r.status, r.headers["content-length"], r.read()) == (200, "123456789", b"")
        with fetcher.request("POST", f"{base}/upload/", {"Content-Length": "0"}) as r:
            assert (r.status, r.headers["location"]) == (202, "/upload/1")
        upload = Upload(blob, 100_000)
        with fetcher.request("PUT", f"{base}/upload/1", {"Content-Length": "100000"}, body=upload) as r:
            assert r.status == 201
        upload.close()
        assert [(m, p, len(b)) for m, p, b in seen] == [("HEAD", "/blob", 0), ("POST", "/upload/", 0),
                                                        ("PUT", "/upload/1", 100_000)]
        assert seen[-1][2] == b"y" * 100_000
        assert fetcher.requests_made == 3 and len(fetcher._opened) == 1
    finally:
        fetcher.close()
        httpd.shutdown()
        httpd.server_close()
