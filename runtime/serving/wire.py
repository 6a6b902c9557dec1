"""HTTP/1.1 as the serving process speaks it, on ``socketserver``: requests read, responses written.

See docs/host-contract.md, "2. The API".
"""

# It does what the standard library's ``http.server.BaseHTTPRequestHandler`` does for this server (the
# same limits, the same answers to a malformed request, keep-alive and ``Expect: 100-continue``;
# tests/runtime/serving/test_wire.py compares the two exchange by exchange): ``http.server`` brings
# ``http.client``, ``email`` and ``ssl`` with it, 19 ms of a worker's start (a server's cold start is
# measured against ``llama-server``'s), for a header reader this server asks three fields of.

from __future__ import annotations

import socketserver
import sys
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

__all__ = ["Headers", "RequestHandler", "MAX_LINE", "MAX_HEADERS"]

#: the longest request line or header line read (``http.server``'s and ``http.client``'s limit)
MAX_LINE = 65536
#: the most header lines one request has (``http.client._MAXHEADERS``)
MAX_HEADERS = 100
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class Headers:
    """A request's headers: each name's first value, asked without regard to case."""

    def __init__(self, fields: Mapping[str, str]) -> None:
        self._fields = dict(fields)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._fields.get(name.lower(), default)


def http_date(when: float | None = None) -> str:
    """``Sun, 06 Nov 1994 08:49:37 GMT`` (RFC 9110's date), in English whatever the locale."""
    t = time.gmtime(when)
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


class _Refused(Exception):
    """A request that cannot be read: its status and the words sent with it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RequestHandler(socketserver.StreamRequestHandler):
    """One connection: requests read one after another, each handed to ``do_<METHOD>`` (a method it
    lacks: 501), until a request or a response closes it. ``send_error`` answers a request that
    cannot be read; a subclass says how (``serving.http``: JSON)."""

    protocol_version = "HTTP/1.0"
    default_request_version = "HTTP/0.9"
    wbufsize = 0  # responses go out as written (their headers in one write)

    command: str | None
    path: str
    request_version: str
    requestline: str
    headers: Headers
    close_connection: bool

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            self.handle_one_request()

    def handle_one_request(self) -> None:
        try:
            raw = self.rfile.readline(MAX_LINE + 1)
            if len(raw) > MAX_LINE:
                self.requestline, self.request_version, self.command = "", "HTTP/0.9", None
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            if not raw:
                self.close_connection = True
                return
            if not self._parse(raw):
                return
            method = getattr(self, f"do_{self.command}", None)
            if method is None:
                self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({self.command!r})")
                return
            method()
            self.wfile.flush()
        except TimeoutError as e:
            self.log_message("Request timed out: %r", e)
            self.close_connection = True

    def _parse(self, raw: bytes) -> bool:
        """The request line and headers into ``command``, ``path``, ``request_version``, ``headers``;
        False (answered) when they cannot be read."""
        self.command = None
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        try:
            if not words:
                return False
            if len(words) >= 3:
                self.request_version = self._version(words[-1])
            if not 2 <= len(words) <= 3:
                raise _Refused(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({self.requestline!r})")
            command, path = words[:2]
            if len(words) == 2:
                self.close_connection = True
                if command != "GET":
                    raise _Refused(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({command!r})")
            self.command = command
            self.path = "/" + path.lstrip("/") if path.startswith("//") else path  # never an authority
            self.headers = self._headers()
        except _Refused as e:
            self.send_error(e.status, str(e))
            return False
        connection = (self.headers.get("Connection") or "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        if ((self.headers.get("Expect") or "").lower() == "100-continue" and self.protocol_version >= "HTTP/1.1"
                and self.request_version >= "HTTP/1.1"):
            self.wfile.write(f"{self.protocol_version} 100 Continue\r\n\r\n".encode("latin-1"))
        return True

    def _version(self, version: str) -> str:
        """``HTTP/x.y`` checked (keep-alive from 1.1 on; 2.0 and later refused).

        Raises:
            _Refused: not an HTTP version (400), or one of 2.0 or later (505).
        """
        number = version[5:].split(".") if version.startswith("HTTP/") else []
        if len(number) != 2 or not all(n.isdigit() and len(n) <= 10 for n in number):
            raise _Refused(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
        major, minor = int(number[0]), int(number[1])
        if (major, minor) >= (1, 1) and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        if (major, minor) >= (2, 0):
            raise _Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
        return version

    def _headers(self) -> Headers:
        """The header lines up to the blank one: each name's first value (a folded line continues
        the one before it).

        Raises:
            _Refused: a line longer than ``MAX_LINE``, or more than ``MAX_HEADERS`` lines (431).
        """
        fields: dict[str, str] = {}
        last: str | None = None
        for _ in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
            if line in (b"\r\n", b"\n", b""):
                return Headers(fields)
            text = line.decode("iso-8859-1").rstrip("\r\n")
            if text[:1] in (" ", "\t"):
                if last is not None and fields.get(last) is not None:
                    fields[last] += " " + text.strip()
                continue
            name, colon, value = text.partition(":")
            last = name.strip().lower()
            if colon and last and last not in fields:
                fields[last] = value.strip()
        raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")

    def version_string(self) -> str:
        """The ``Server`` header's value."""
        return "superfluid"

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer a request that cannot be read (a subclass says how); here a bare status line."""
        self.close_connection = True
        self.send_response(code, message)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_response(self, code: int, message: str | None = None) -> None:
        """Start a response: its status line, ``Server`` and ``Date``; logged."""
        self.log_message('"%s" %s %s', self.requestline, str(int(code)), "-")
        if message is None:
            try:
                message = HTTPStatus(code).phrase
            except ValueError:
                message = ""
        self._buffer: list[bytes] = []
        if self.request_version != "HTTP/0.9":  # an HTTP/0.9 answer is its body alone
            self._buffer.append(f"{self.protocol_version} {int(code)} {message}\r\n".encode("latin-1", "replace"))
        self.send_header("Server", self.version_string())
        self.send_header("Date", http_date())

    def send_header(self, keyword: str, value: str) -> None:
        """One header of the response started; ``Connection`` decides whether the connection stays."""
        if self.request_version != "HTTP/0.9":
            self._buffer.append(f"{keyword}: {value}\r\n".encode("latin-1", "strict"))
        if keyword.lower() == "connection":
            if value.lower() == "close":
                self.close_connection = True
            elif value.lower() == "keep-alive":
                self.close_connection = False

    def end_headers(self) -> None:
        """The blank line, and the status line and headers written at once."""
        if self.request_version != "HTTP/0.9":
            self._buffer.append(b"\r\n")
            self.wfile.write(b"".join(self._buffer))
        self._buffer = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """One line on stderr, as ``http.server`` writes it; a subclass decides whether to."""
        t = time.localtime()
        when = f"{t.tm_mday:02d}/{_MONTHS[t.tm_mon - 1]}/{t.tm_year} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
        sys.stderr.write(f"{self.client_address[0]} - - [{when}] {format % args}\n")
