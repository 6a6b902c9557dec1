"""The OCI client's rules (installer/oci.py, oci_auth.py) as tables, and its fetcher against a fake
registry on loopback that asks for a Bearer token, redirects blobs to an "object store" on another
port and cuts a body once: the token is asked with the login, the blob is fetched with the token,
the redirect is followed without it, and the cut download resumes with ``Range``."""

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

from superfluid.installer.cache import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.download import download
from superfluid.installer.errors import DownloadError, VerificationError
from superfluid.installer.oci import Layer, engine_tag, index_tag, manifest, parse_manifest, parse_ref, ref_of_url
from superfluid.installer.oci_auth import Login, login_for, parse_challenge, token_url
from superfluid.installer.oci_fetcher import OciFetcher
from superfluid.runtime.errors import BadFile

# -- references ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "host", "repository", "api"), [
    pytest.param("oci://127.0.0.1:5000/fleet/engines", "127.0.0.1:5000", "fleet/engines", "http://127.0.0.1:5000",
                 id="loopback-plain-http"),
    pytest.param("oci://localhost/x", "localhost", "x", "http://localhost", id="localhost"),
    pytest.param("OCI://Registry.Example/team/sub/engines/", "registry.example", "team/sub/engines",
                 "https://registry.example", id="remote-https-trailing-slash"),
    pytest.param("oci://[::1]:5000/a-b/c__d", "[::1]:5000", "a-b/c__d", "http://[::1]:5000", id="ipv6"),
])
def test_a_reference(where: str, host: str, repository: str, api: str) -> None:
    ref = parse_ref(where, environ={})
    assert (ref.host, ref.repository, ref.api) == (host, repository, api)
    assert ref.root == f"oci://{host}/{repository}/"


@pytest.mark.parametrize(("where", "fault"), [
    pytest.param("https://registry.example/x", "not an oci://", id="another-scheme"),
    pytest.param("oci://registry.example", "not a repository name", id="no-repository"),
    pytest.param("oci://registry.example/Fleet", "not a repository name", id="upper-case"),
    pytest.param("oci://registry.example/fleet:latest", "no tag", id="a-tag"),
    pytest.param("oci://registry.example/fleet@sha256:00", "no tag", id="a-digest"),
    pytest.param("oci://bad_host/fleet", "not a registry host", id="bad-host"),
    pytest.param("oci://user:s3cret@registry.example/fleet", "credentials", id="credentials"),
])
def test_a_bad_reference(where: str, fault: str) -> None:
    with pytest.raises(ValueError, match=fault) as e:
        parse_ref(where, environ={})
    assert "s3cret" not in str(e.value)


def test_plain_http_to_another_host_only_when_asked() -> None:
    assert parse_ref("oci://registry.example/x", environ={}).api == "https://registry.example"
    assert parse_ref("oci://registry.example/x", environ={"SUPERFLUID_OCI_PLAIN_HTTP": "1"}).api == \
        "http://registry.example"


def test_the_registry_of_a_locked_url() -> None:
    url = "oci://127.0.0.1:5000/fleet/engines/basecompute/baseRT/releases/download/v0.4.0/x.tar.gz"
    ref = ref_of_url(url, environ={})
    assert ref is not None and ref.repository == "fleet/engines"
    assert ref.path_of(url) == "basecompute/baseRT/releases/download/v0.4.0/x.tar.gz"
    assert ref_of_url("https://github.com/a/b/releases/download/t/n", environ={}) is None


@pytest.mark.parametrize(("parts", "tag"), [
    (("basert", "0.4.0", "linux-x64", "cpu"), "basert-0.4.0-linux-x64-cpu"),
    (("llamacpp", "b11642", "linux-x64", "cuda-13.4"), "llamacpp-b11642-linux-x64-cuda-13.4"),
    (("x", "1.0+local", "linux-x64", "cpu"), "x-1.0_local-linux-x64-cpu"),
])
def test_an_engine_tag(parts: tuple[str, str, str, str], tag: str) -> None:
    assert engine_tag(*parts) == tag


def test_an_index_tag_per_repository() -> None:
    assert index_tag("basecompute/baseRT") == "releases.basecompute.baseRT"
    assert index_tag("ggml-org/llama.cpp") == "releases.ggml-org.llama.cpp"


# -- manifests ----------------------------------------------------------------------------------------


def test_a_manifest_is_stable_and_read_back() -> None:
    layers = [Layer("a/b/releases/download/t/x.tar.gz", "ab" * 32, 10), Layer("a/b/releases.json", "cd" * 32, 2)]
    one = manifest(layers, artifact_type="application/vnd.superfluid.engine.v1", annotations={"b": "2", "a": "1"})
    two = manifest(layers, artifact_type="application/vnd.superfluid.engine.v1", annotations={"a": "1", "b": "2"})
    assert one == two
    doc = json.loads(one)
    assert doc["config"]["digest"] == "sha256:" + hashlib.sha256(b"{}").hexdigest()
    assert doc["layers"][0]["annotations"] == {"org.opencontainers.image.title": layers[0].title}
    assert parse_manifest(one, "m") == layers


@pytest.mark.parametrize(("doc", "fault"), [
    pytest.param(b"not json", "not a readable manifest", id="not-json"),
    pytest.param(b'{"schemaVersion": 2}', "no layers", id="no-layers"),
    pytest.param(json.dumps({"layers": [{"digest": "md5:00", "size": 1,
                                         "annotations": {"org.opencontainers.image.title": "x"}}]}).encode(),
                 "no sha256 digest", id="another-digest"),
    pytest.param(json.dumps({"layers": [{"digest": "sha256:" + "0" * 64, "size": -1,
                                         "annotations": {"org.opencontainers.image.title": "x"}}]}).encode(),
                 "no sha256 digest and size", id="negative-size"),
])
def test_a_broken_manifest(doc: bytes, fault: str) -> None:
    with pytest.raises(BadFile, match=fault):
        parse_manifest(doc, "m")


# -- logins and challenges ----------------------------------------------------------------------------


def _auths(path: Path, entries: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": entries}))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("entries", "user"), [
    pytest.param({"reg.example:5000": {"auth": _b64("u:p:w")}}, "u", id="auth-base64"),
    pytest.param({"https://reg.example:5000/v1/": {"auth": _b64("u:p:w")}}, "u", id="legacy-url-key"),
    pytest.param({"reg.example:5000": {"username": "u", "password": "p:w"}}, "u", id="username-password"),
    pytest.param({"reg.example:5000": {"auth": _b64("wide:x")}, "reg.example:5000/fleet": {"auth": _b64("u:p:w")}},
                 "u", id="namespace-wins"),
    pytest.param({"reg.example:5000/other": {"auth": _b64("u:p:w")}}, None, id="another-namespace"),
    pytest.param({"reg.example": {"auth": _b64("u:p:w")}}, None, id="another-port"),
])
def test_a_login_from_a_docker_config(tmp_path: Path, entries: dict[str, Any], user: str | None) -> None:
    _auths(tmp_path / ".docker" / "config.json", entries)
    got = login_for("reg.example:5000", "fleet/engines", {"HOME": str(tmp_path)})
    assert (got.user if got else None) == user
    if got is not None:
        assert got.secret == "p:w" and "p:w" not in repr(got)


def test_registry_auth_file_comes_first(tmp_path: Path) -> None:
    _auths(tmp_path / ".docker" / "config.json", {"reg.example": {"auth": _b64("docker:x")}})
    named = _auths(tmp_path / "auth.json", {"reg.example": {"auth": _b64("named:x")}})
    env = {"HOME": str(tmp_path), "REGISTRY_AUTH_FILE": str(named)}
    login = login_for("reg.example", "x", env)
    assert login is not None and login.user == "named" and login.source == str(named)
    config = _auths(tmp_path / "cfg" / "config.json", {"reg.example": {"auth": _b64("cfg:x")}})
    login = login_for("reg.example", "x", {"HOME": str(tmp_path), "DOCKER_CONFIG": str(config.parent)})
    assert login is not None and login.user == "cfg"


@pytest.mark.parametrize(("text", "fault"), [
    pytest.param("{not json", "not a JSON auth file", id="not-json"),
    pytest.param('{"auths": []}', "no auths object", id="auths-not-object"),
    pytest.param(json.dumps({"auths": {"reg.example": {"auth": "!!s3cret!!"}}}), "not base64", id="bad-base64"),
])
def test_a_broken_auth_file_is_named_and_no_secret_repeated(tmp_path: Path, text: str, fault: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(text)
    with pytest.raises(BadFile, match=fault) as e:
        login_for("reg.example", "x", {"REGISTRY_AUTH_FILE": str(path)})
    assert str(path) in str(e.value) and "s3cret" not in str(e.value)


@pytest.mark.parametrize(("header", "scheme", "params"), [
    ('Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"', "bearer",
     {"realm": "https://auth.example/token", "service": "registry.example", "scope": "repository:a/b:pull"}),
    ('Basic realm="fleet-registry"', "basic", {"realm": "fleet-registry"}),
    ('bearer realm=https://auth.example/t, service=reg', "bearer",
     {"realm": "https://auth.example/t", "service": "reg"}),
    ('Bearer realm="a\\"b"', "bearer", {"realm": 'a"b'}),
])
def test_a_challenge(header: str, scheme: str, params: dict[str, str]) -> None:
    got = parse_challenge(header)
    assert got is not None and (got.scheme, dict(got.params)) == (scheme, params)


def test_no_challenge() -> None:
    assert parse_challenge(None) is None and parse_challenge("  ") is None


def test_a_token_is_asked_for_our_scope_too() -> None:
    c = parse_challenge('Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull"')
    assert c is not None
    assert token_url(c, "repository:a:pull,push") == (
        "https://auth.example/token?service=reg&scope=repository%3Aa%3Apull&scope=repository%3Aa%3Apull%2Cpush")
    assert token_url(c, "repository:a:pull").count("scope=") == 1


# -- the fetcher against a fake registry ----------------------------------------------------------------

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


def _fetcher(fake: _Fake, login: Login | None) -> OciFetcher:
    ref = parse_ref(f"oci://{fake.url('registry').removeprefix('http://')}/fleet/engines", environ={})
    return OciFetcher(ref, FetchConfig(backoff_base=0.01), login=login, sleep=lambda _s: None)


def test_a_bearer_challenge_a_redirect_without_the_token_and_a_resumed_blob(tmp_path: Path, fake: _Fake) -> None:
    net = _fetcher(fake, Login("fleet", "pw", "test"))
    url = net.ref.root + "a/b/releases/download/v1/x.tar.gz"
    net.learn(url, SHA)
    got = download(url, SHA, len(BLOB), cache=Cache(tmp_path / "cache"), fetcher=net)
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
    net = _fetcher(fake, None)
    net.learn(net.ref.root + "a/b/x", SHA)
    with pytest.raises(DownloadError, match="docker login 127.0.0.1") as e:
        net.get_bytes(net.ref.root + "a/b/x", max_bytes=1 << 20)
    assert e.value.status == 401


def test_the_digest_is_ours_to_check(tmp_path: Path, fake: _Fake) -> None:
    net = _fetcher(fake, Login("fleet", "pw", "test"))
    url = net.ref.root + "a/b/x"
    net.learn(url, SHA)
    other = hashlib.sha256(b"another file").hexdigest()
    with pytest.raises(VerificationError, match=other):
        download(url, other, len(BLOB), cache=Cache(tmp_path / "cache"), fetcher=net)
    assert not (tmp_path / "cache" / "sha256" / SHA).exists()
