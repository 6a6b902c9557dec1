"""``http://`` to this machine through the standard library, without importing requests (docs/install.md)."""

from __future__ import annotations

import http.client
import threading
import zlib
from collections.abc import Collection, Iterator
from typing import Any
from urllib.parse import urlsplit

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, DownloadStalled
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import Credential, FetchResponse, Headers, HttpRequest, Upload
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.installer.transport.urls import is_loopback

__all__ = ["LoopbackFetcher", "serves", "network_fetcher"]

#: the variables through which ``requests`` would send an ``http://`` request to a proxy
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def serves(url: str, *, proxied: bool) -> bool:
    """Whether ``LoopbackFetcher`` reads ``url`` as ``RequestsFetcher`` would: plain ``http://`` to
    loopback, no proxy named (``proxied``: one of ``PROXY_VARIABLES`` is set)."""
    return urlsplit(url).scheme.lower() == "http" and is_loopback(url) and not proxied


def network_fetcher(root: str, config: FetchConfig, *, proxied: bool, plain_http_origins: Collection[str] = (),
                    credential: Credential | None = None) -> Fetcher:
    """The fetcher for a server at ``root``: the standard library's for plain ``http://`` to this
    machine when it serves it as ``requests`` would (``serves``: no proxy named), so that reading a
    local mirror or registry does not import ``requests``; else ``RequestsFetcher``."""
    kind = LoopbackFetcher if serves(root, proxied=proxied) else RequestsFetcher
    return kind(config, plain_http_origins=plain_http_origins, credential=credential)


class LoopbackFetcher(Fetcher):
    """``http://`` to loopback through ``http.client``, every method: a mirror or registry on this
    machine (a fleet's local cache, a test's release server) is read without importing ``requests``,
    whose import costs more than such a mirror's whole listing.

    A ``Fetcher`` like the others: redirects, the scheme rule, statuses, caps, retries and
    credentials are the base class's. One kept-alive connection per thread and origin; a ``gzip``
    or ``deflate`` body decoded when the request asked for one (as ``RequestsFetcher`` does);
    timeouts mapped as that one maps them (no connection in time: a retryable ``DownloadError``; no
    byte in time: ``DownloadStalled``). A redirect elsewhere (``https://``, another host) is fetched
    by a ``RequestsFetcher``, made then. ``serves`` says where it may stand in for one."""

    def __init__(self, config: FetchConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._local = threading.local()
        self._elsewhere: Fetcher | None = None
        #: every connection any thread opened, so that ``close`` reaches those of a download pool's threads
        self._opened: list[http.client.HTTPConnection] = []
        self._opened_lock = threading.Lock()

    def close(self) -> None:
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()
        if self._elsewhere is not None:
            self._elsewhere.close()

    def _connection(self, netloc: str, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to ``netloc`` (a new one when ``fresh``), and whether it was used before."""
        connections: dict[str, http.client.HTTPConnection] = self._local.__dict__.setdefault("connections", {})
        conn = connections.get(netloc)
        if conn is not None and not fresh:
            return conn, True
        if conn is not None:
            conn.close()
        parts = urlsplit(f"http://{netloc}")
        conn = http.client.HTTPConnection(parts.hostname or "localhost", parts.port or 80,
                                          timeout=self._time_left(self.config.connect_timeout))
        connections[netloc] = conn
        with self._opened_lock:
            self._opened.append(conn)
        return conn, False

    def _drop(self, netloc: str) -> None:
        conn = getattr(self._local, "connections", {}).pop(netloc, None)
        if conn is not None:
            conn.close()

    def _send(self, request: HttpRequest) -> FetchResponse:
        url, headers = request.url, request.headers
        parts = urlsplit(url)
        if parts.scheme.lower() != "http" or not is_loopback(url):
            if self._elsewhere is None:
                self._elsewhere = RequestsFetcher(self.config)
            return self._elsewhere._send(request)  # the rules stay this one's (request, _check_url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        stall = self._time_left(self.config.stall_timeout)
        send = {"Accept-Encoding": "identity", **headers}
        for fresh in (False, True):  # a kept connection the server closed meanwhile: once more, anew
            if isinstance(request.body, Upload):
                request.body.rewind()
            conn, reused = self._connection(parts.netloc, fresh)
            try:
                if conn.sock is None:
                    conn.connect()
            except TimeoutError as e:
                self._drop(parts.netloc)
                raise DownloadError(url, f"could not connect within {self.config.connect_timeout:g} s",
                                    retryable=True) from e
            try:
                conn.sock.settimeout(stall)
                conn.request(request.method, target, body=request.body, headers=send)
                r = conn.getresponse()
                break
            except TimeoutError as e:
                self._drop(parts.netloc)
                raise DownloadStalled(url, stall) from e
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._drop(parts.netloc)
                if not reused:
                    raise
        encoding = (r.getheader("Content-Encoding") or "identity").strip().lower()
        decode = send.get("Accept-Encoding", "identity") != "identity" and encoding != "identity"
        if decode and encoding not in _DECODERS:
            self._drop(parts.netloc)
            raise DownloadError(url, f"answered with Content-Encoding {encoding}, which is not read here")

        def chunks() -> Iterator[bytes]:
            received = 0
            inflate = zlib.decompressobj(_DECODERS[encoding]) if decode else None
            try:
                while chunk := r.read1(self.config.chunk_size):
                    received += len(chunk)
                    yield inflate.decompress(chunk) if inflate is not None else chunk
                if r.length:  # the connection closed before Content-Length said: as urllib3 says it
                    raise http.client.IncompleteRead(b"", r.length)
                if inflate is not None and (tail := inflate.flush()):
                    yield tail
            except TimeoutError as e:
                self._drop(parts.netloc)
                raise DownloadStalled(url, stall, received=received) from e
            except (http.client.HTTPException, OSError, zlib.error) as e:
                self._drop(parts.netloc)
                raise DownloadError(url, f"connection broken after {received} bytes: {e}", retryable=True) from e

        def close() -> None:
            read_whole = r.isclosed() or r.length == 0
            r.close()
            if not read_whole or r.will_close:  # a body left unread, or the server closes: not kept
                self._drop(parts.netloc)

        return FetchResponse(url, r.status, Headers(r.getheaders()), chunks(), close)
