"""``installer/sources/oci/client``: a ``Registry`` and its thin ``BlobFetcher``, against a fake registry on
loopback that asks for a Bearer token, redirects blobs to an "object store" on another port and cuts a
body once: the token is asked with the login, the blob (of the digest the fetcher is given) is fetched
with the token, the redirect is followed without it, and the cut download resumes with ``Range``."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.cache.download import download
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, VerificationError
from superfluid.installer.sources.oci.auth import Login
from superfluid.installer.sources.oci.client import Registry
from superfluid.installer.sources.oci.ref import parse_ref
from superfluid.installer.transport.requests_fetcher import RequestsFetcher


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


BLOB = bytes(range(256)) * 400
SHA = hashlib.sha256(BLOB).hexdigest()
TOKEN = "t0ken-for-pull"


class _Fake:
    """A registry that wants a Bearer token, its token service (wants the login) and an object store."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []  # (server, path, headers)
        self.cut_once = True
        self.servers: dict[str, ThreadingHTTPServer] = {}
        for name in ("registry", "store"):
            self.servers[name] = self._serve(name)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.servers[name].server_address[1]}"

    def _serve(self, name: str) -> ThreadingHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.seen.append((name, self.path, {k.lower(): v for k, v in self.headers.items()}))
                fake.answer(name, self)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return httpd

    def answer(self, name: str, h: BaseHTTPRequestHandler) -> None:
        auth = h.headers.get("Authorization") or ""
        if name == "registry" and h.path.startswith("/token"):
            if auth != "Basic " + _b64("fleet:pw"):
                return self._send(h, 401, b"{}")
            return self._send(h, 200, json.dumps({"token": TOKEN}).encode())
        if name == "registry":
            if auth != f"Bearer {TOKEN}":
                realm = f"{self.url('registry')}/token"
                return self._send(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {
                    "WWW-Authenticate": f'Bearer realm="{realm}",service="fake",scope="repository:fleet/engines:pull"'})
            return self._send(h, 307, b"", {"Location": f"{self.url('store')}/objects/{SHA}?signed=1"})
        start = 0
        rng = h.headers.get("Range")
        if rng and h.headers.get("If-Range") == f'"{SHA}"':
            start = int(rng.removeprefix("bytes=").removesuffix("-"))
        body = BLOB[start:]
        extra = {"ETag": f'"{SHA}"', "Accept-Ranges": "bytes"}
        if start:
            extra["Content-Range"] = f"bytes {start}-{len(BLOB) - 1}/{len(BLOB)}"
        h.send_response(206 if start else 200)
        for k, v in {**extra, "Content-Length": str(len(body))}.items():
            h.send_header(k, v)
        h.end_headers()
        if self.cut_once and not start:
            self.cut_once = False
            h.wfile.write(body[:30000])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)
            return
        h.wfile.write(body)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        for k, v in {**(headers or {}), "Content-Length": str(len(body))}.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def close(self) -> None:
        for httpd in self.servers.values():
            httpd.shutdown()
            httpd.server_close()


@pytest.fixture
def fake() -> Iterator[_Fake]:
    f = _Fake()
    yield f
    f.close()


def _registry(fake: _Fake, login: Login | None) -> Registry:
    ref = parse_ref(f"oci://{fake.url('registry').removeprefix('http://')}/fleet/engines")
    return Registry(ref, RequestsFetcher(FetchConfig(backoff_base=0.01), sleep=lambda _s: None), login=login)


def test_a_bearer_challenge_a_redirect_without_the_token_and_a_resumed_blob(tmp_path: Path, fake: _Fake) -> None:
    net = _registry(fake, Login("fleet", "pw", "test"))
    url = net.ref.root + "a/b/releases/download/v1/x.tar.gz"
    got = download(url, SHA, len(BLOB), cache=Cache(tmp_path / "cache"), fetcher=net.fetcher({url: SHA}))
    assert got.path.read_bytes() == BLOB and not got.cached
    tokens = [h for s, p, h in fake.seen if p.startswith("/token")]
    assert tokens and all(h["authorization"] == "Basic " + _b64("fleet:pw") for h in tokens)
    blobs = [h for s, p, h in fake.seen if s == "registry" and "/blobs/" in p]
    assert blobs[0].get("authorization") is None and blobs[-1]["authorization"] == f"Bearer {TOKEN}"
    store = [h for s, _, h in fake.seen if s == "store"]
    assert len(store) == 2 and all("authorization" not in h for h in store)  # never along the redirect
    assert store[1]["range"] == "bytes=30000-"  # the cut body resumed where it stopped
    assert len(tokens) == 1  # the token is kept for the retry


def test_no_login_is_a_401_naming_the_fix(fake: _Fake) -> None:
    net = _registry(fake, None)
    url = net.ref.root + "a/b/x"
    with pytest.raises(DownloadError, match="docker login 127.0.0.1") as e:
        net.fetcher({url: SHA}).get_bytes(url, max_bytes=1 << 20)
    assert e.value.status == 401


def test_the_digest_is_ours_to_check(tmp_path: Path, fake: _Fake) -> None:
    net = _registry(fake, Login("fleet", "pw", "test"))
    url = net.ref.root + "a/b/x"
    other = hashlib.sha256(b"another file").hexdigest()
    with pytest.raises(VerificationError, match=other):  # the registry's blob of SHA is not the bytes of `other`
        download(url, other, len(BLOB), cache=Cache(tmp_path / "cache"), fetcher=net.fetcher({url: SHA}))
    assert not (tmp_path / "cache" / "sha256" / SHA).exists()


def test_the_blob_asked_is_the_one_of_the_digest_expected(tmp_path: Path, fake: _Fake) -> None:
    net = _registry(fake, Login("fleet", "pw", "test"))
    url = net.ref.root + "a/b/releases/download/v1/x.tar.gz"
    assert net.resolve(url, SHA.upper()) == net.ref.blob_url(SHA)  # by the digest: no index read
    assert net.resolve("https://elsewhere.test/x") == "https://elsewhere.test/x"  # not below the repository
    download(url, SHA, len(BLOB), cache=Cache(tmp_path / "cache"), fetcher=net.fetcher({url: SHA}))
    asked = [p for s, p, _ in fake.seen if s == "registry" and not p.startswith("/token")]
    assert asked and set(asked) == {f"/v2/fleet/engines/blobs/sha256:{SHA}"}  # no manifest, no index
