"""A company proxy (issue 31, item 6): ``HTTP_PROXY`` is honoured by the install's fetchers, and
``NO_PROXY`` takes a host out of it, as curl, pip and requests do. A real forwarding proxy on
loopback records what went through it; the real console script installs through it."""

from __future__ import annotations

import http.client
import http.server
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.conftest import Home
from tests.release_server import ReleaseServer
from tests.threaded_server import serving


class _Forward(http.server.BaseHTTPRequestHandler):
    """A plain-HTTP forwarding proxy: a request for an absolute URL is made again to its host."""

    seen: list[str]

    def _relay(self) -> None:
        self.seen.append(self.path)
        target = urlsplit(self.path)
        if not target.hostname:
            self.send_error(400, "a proxy is asked for absolute URLs")
            return
        upstream = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "connection")}
        upstream.request(self.command, target.path + (f"?{target.query}" if target.query else ""), headers=headers)
        answer = upstream.getresponse()
        body = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        upstream.close()

    do_GET = _relay  # noqa: N815 - the standard library's names
    do_HEAD = _relay  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Recording", (_Forward,), {"seen": seen})
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        yield f"http://127.0.0.1:{port}", seen


@pytest.mark.native
def test_an_install_goes_through_the_proxy_the_environment_names(cli_home: Home, server: ReleaseServer,
                                                                  proxy: tuple[str, list[str]]) -> None:
    url, seen = proxy
    through = Home(cli_home.path, {**cli_home.env, "HTTP_PROXY": url, "NO_PROXY": ""})
    run = through.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    assert any(p.endswith("releases.json") for p in seen), seen  # the listing came through the proxy
    assert any(p.endswith(".tar.gz") for p in seen), seen  # and so did the archive


@pytest.mark.native
def test_no_proxy_takes_a_host_out_of_it(cli_home: Home, server: ReleaseServer,
                                         proxy: tuple[str, list[str]]) -> None:
    url, seen = proxy
    direct = Home(cli_home.path, {**cli_home.env, "HTTP_PROXY": url, "NO_PROXY": "127.0.0.1,localhost"})
    run = direct.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    assert seen == []
