"""``serving.wire`` reads requests and writes responses as ``http.server.BaseHTTPRequestHandler`` does:
each raw exchange below goes over a real socket to the same handler built on each, and both answer
with the same status lines and keep or close the connection alike."""

from __future__ import annotations

import http.server
import re
import socket
import socketserver
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from email.utils import formatdate
from typing import Any

import pytest

from superfluid.runtime.serving.wire import MAX_HEADERS, MAX_LINE, RequestHandler, http_date


class _Echo:
    """What both handlers answer: the method, the path and header ``X-A``, and a POST's body."""

    protocol_version = "HTTP/1.1"
    headers: Any
    rfile: Any
    wfile: Any
    command: str
    path: str

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _answer(self, extra: bytes = b"") -> None:
        body = f"{self.command} {self.path} {self.headers.get('X-A')}".encode() + extra
        self.send_response(200)  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(body)))  # type: ignore[attr-defined]
        self.end_headers()  # type: ignore[attr-defined]
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self._answer(b" " + self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # as serving.http answers a line it could not read: with a status
        super().send_error(code, message, explain)  # type: ignore[misc]


class Ours(_Echo, RequestHandler):
    pass


class Stdlib(_Echo, http.server.BaseHTTPRequestHandler):
    pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def serving(handler: type[socketserver.BaseRequestHandler]) -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


#: seconds to wait for a first answer, and for more after one, before calling the connection open
FIRST, IDLE = 3.0, 0.75


def exchange(port: int, raw: bytes) -> tuple[list[str], list[bytes], bool]:
    """Send ``raw``; the status codes answered (``HTTP/x.y NNN``), each 200's body (its white space
    made one space), and whether the server closed the connection (else it was still open after a pause:
    ``FIRST`` seconds for a first answer, ``IDLE`` after each, so that a loaded machine reads alike)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        sock.settimeout(FIRST)
        got, closed = b"", False
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            got += chunk
            sock.settimeout(IDLE)
    statuses = [s.decode() for s in re.findall(rb"HTTP/\d\.\d \d{3}", got)]
    bodies = [b" ".join(m.split()) for m in re.findall(rb"HTTP/1\.1 200 [^\r]*\r\n.*?\r\n\r\n(.*?)(?=HTTP/1\.|$)", got,
                                                      re.S)]
    return statuses, bodies, closed


CASES = {
    "a GET": b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: one\r\n\r\n",
    "a POST with a body": b"POST /v1 HTTP/1.1\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello",
    "two pipelined": b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
    "close asked": b"GET /a HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
    "HTTP/1.0 closes": b"GET /a HTTP/1.0\r\n\r\n",
    "HTTP/1.0 keep-alive": b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "HTTP/0.9": b"GET /a\r\n",
    "HTTP/0.9 POST": b"POST /a\r\n",
    "HTTP/2.0": b"GET / HTTP/2.0\r\n\r\n",
    "a version of letters": b"GET / HTTP/1.x\r\n\r\n",
    "no version": b"GET / FOO\r\n\r\n",
    "a version too long": b"GET / HTTP/1." + b"1" * 11 + b"\r\n\r\n",
    "four words": b"GET / HTTP/1.1 more\r\n\r\n",
    "one word": b"GET\r\n\r\n",
    "a blank line": b"\r\n",
    "nothing": b"",
    "a method nobody handles": b"BREW /pot HTTP/1.1\r\n\r\n",
    # what is refused is the last the client sends: the server closes with nothing unread (no reset)
    "a request line too long": b"GET /" + b"a" * (MAX_LINE - 4),
    "a header line too long": b"GET / HTTP/1.1\r\nX-B: " + b"b" * (MAX_LINE - 4),
    "too many headers": b"GET / HTTP/1.1\r\n" + b"X-B: b\r\n" * (MAX_HEADERS + 1),
    "as many headers as allowed": b"GET / HTTP/1.1\r\n" + b"X-B: b\r\n" * (MAX_HEADERS - 1) + b"\r\n",
    "a name asked in another case": b"GET / HTTP/1.1\r\nx-a: lower\r\n\r\n",
    "a header given twice": b"GET / HTTP/1.1\r\nX-A: first\r\nX-A: second\r\n\r\n",
    "a folded header": b"GET / HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n",
    "a path of two slashes": b"GET //evil.example/x HTTP/1.1\r\n\r\n",
    "100-continue": b"POST /v1 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
    "bare newlines": b"GET /n HTTP/1.1\nX-A: n\n\n",
}


@pytest.fixture(scope="module")
def ports() -> Iterator[tuple[int, int]]:
    with serving(Ours) as ours, serving(Stdlib) as stdlib:
        yield ours, stdlib


@pytest.mark.parametrize("raw", CASES.values(), ids=CASES.keys())
def test_each_request_is_answered_as_http_server_answers_it(ports: tuple[int, int], raw: bytes) -> None:
    with ThreadPoolExecutor(2) as pool:  # both at once: an open connection is known only by waiting
        ours, stdlib = pool.map(lambda port: exchange(port, raw), ports)
    assert ours == stdlib


def test_the_cases_reach_every_answer() -> None:
    """The table is not all 200s: it reaches each refusal the reader has."""
    refusals = ("a version of letters", "HTTP/2.0", "a request line too long", "too many headers",
                "a method nobody handles", "100-continue")
    with serving(Ours) as port:
        seen = {code for name in refusals for code in (s.split()[1] for s in exchange(port, CASES[name])[0])}
    assert {"100", "200", "400", "414", "431", "501", "505"} <= seen


@pytest.mark.parametrize("when", [0.0, 784111777.0, 1700000000.0, 4102444799.0])
def test_the_date_header_is_the_one_http_server_writes(when: float) -> None:
    assert http_date(when) == formatdate(when, usegmt=True)
