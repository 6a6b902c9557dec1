"""The network seam: one abstract method; redirects, schemes, statuses, caps and retries written once."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urljoin, urlsplit

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import (
    ConnectionRefused,
    DownloadError,
    DownloadStalled,
    HostUnreachable,
    OfflineMissing,
    RateLimited,
    SizeExceeded,
)

if TYPE_CHECKING:
    import requests

__all__ = [
    "Credential",
    "Headers",
    "FetchResponse",
    "Fetcher",
    "RequestsFetcher",
    "FileFetcher",
    "NoNetworkFetcher",
    "origin_of",
    "is_loopback",
    "parse_retry_after",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased, default port omitted.

    >>> origin_of("HTTPS://API.github.com:443/repos")
    'https://api.github.com'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or (scheme, port) in (("https", 443), ("http", 80)):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds asked by a ``Retry-After`` header (delta-seconds or HTTP-date), ``None`` if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    import email.utils  # rare: an HTTP-date

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only response headers."""

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._d = {str(k).lower(): str(v) for k, v in pairs}

    def __getitem__(self, key: str) -> str:
        return self._d[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._d

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return f"Headers({self._d!r})"


@dataclass(frozen=True, slots=True)
class Credential:
    """A secret ``Authorization`` value that may be sent to one origin only."""

    origin: str  # e.g. "https://api.github.com", as origin_of() spells it
    authorization: str  # e.g. "Bearer <token>"; never logged

    def __repr__(self) -> str:
        return f"Credential(origin={self.origin!r}, authorization=<hidden>)"


class FetchResponse:
    """One HTTP answer: final URL, status, headers and a body of byte chunks, read once.

    Iterate it for the body; ``close()`` (or leaving ``with``) releases the connection.
    """

    def __init__(
        self,
        url: str,
        status: int,
        headers: Mapping[str, str],
        chunks: Iterator[bytes],
        close: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.status = status
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self._chunks = chunks
        self._close = close

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks

    def read(self) -> bytes:
        """The whole (capped) body."""
        return b"".join(self._chunks)

    def close(self) -> None:
        if self._close is not None:
            close, self._close = self._close, None
            try:
                close()
            except Exception:  # closing a broken connection must not hide the real error
                log.debug("closing %s failed", self.url, exc_info=True)

    def __enter__(self) -> FetchResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Fetcher(ABC):
    """The seam. Subclasses implement ``_fetch``; callers use ``open``, ``get_bytes`` and ``retry``.

    Args:
        config: the limits (timeouts, retries, caps).
        plain_http_origins: origins the user named explicitly that may be spoken to over ``http://``.
        sleep: how to wait between attempts (tests pass a recorder).
        clock: epoch seconds now (for ``X-RateLimit-Reset``).
        credential: an ``Authorization`` for one origin sent with every request there that names
            no credential of its own (a URL's ``user:password@``, taken out of the URL).
    """

    schemes: frozenset[str] = frozenset({"https", "http"})

    def __init__(
        self,
        config: FetchConfig | None = None,
        *,
        plain_http_origins: Collection[str] = (),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        credential: Credential | None = None,
    ) -> None:
        self.config = config or FetchConfig()
        self.plain_http_origins = frozenset(origin_of(o) for o in plain_http_origins)
        #: sent to its origin on every request that names none (a mirror's ``user:password@``)
        self.credential = credential
        self._sleep = sleep
        self._clock = clock
        self._count_lock = threading.Lock()
        self._waiting = threading.local()  # per thread: when the request being retried last got a byte
        self.requests_made = 0  # _fetch calls so far (the benchmark counts warm listings)

    @abstractmethod
    def _fetch(self, url: str, headers: Mapping[str, str]) -> FetchResponse:
        """One GET of ``url`` with exactly ``headers``; no redirect followed; body streamed.

        Raises:
            DownloadError: a transport fault, ``retryable`` when another attempt may help
                (connection refused or reset, stall as ``DownloadStalled``).
        """

    def close(self) -> None:  # noqa: B027 - optional hook, most fetchers hold nothing
        """Release pooled connections (no-op by default)."""

    # -- one request, redirects by hand ---------------------------------------------------------

    def open(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        credential: Credential | None = None,
        max_bytes: int | None = None,
        accept: Collection[int] = (),
    ) -> FetchResponse:
        """GET ``url``, following redirects, and answer a 2xx, a 304 or a status in ``accept``.

        ``credential`` is attached only to hops at its origin. The body is capped at ``max_bytes``
        (``None``: ``config.max_download_bytes``) and every fault while reading it is a
        ``DownloadError``.

        Raises:
            RateLimited: 429, or 403 with ``X-RateLimit-Remaining: 0`` or a ``Retry-After``.
            DownloadError: any other status, a refused scheme, too many redirects, transport.
            SizeExceeded: ``Content-Length`` or the body beyond ``max_bytes``.
        """
        cap = self.config.max_download_bytes if max_bytes is None else max_bytes
        credential = credential or self.credential
        current = url
        for hop in range(self.config.max_redirects + 1):
            self._check_url(current, redirected_from=url if hop else None)
            send = {k: v for k, v in (headers or {}).items() if k.lower() != "authorization"}
            send.setdefault("User-Agent", self.config.user_agent)
            if credential is not None and origin_of(current) == credential.origin:
                send["Authorization"] = credential.authorization
            response = self._call(current, send)
            if response.status in _REDIRECTS and response.status not in accept:
                location = response.headers.get("location")
                response.close()
                if not location:
                    raise DownloadError(current, f"HTTP {response.status} redirect without a Location")
                log.debug("%s redirects to %s", current, location)
                current = urljoin(current, location)
                continue
            self._check_status(response, accept, credential)
            return self._capped(response, cap)
        raise DownloadError(url, f"more than {self.config.max_redirects} redirects")

    def get_bytes(
        self,
        url: str,
        *,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        credential: Credential | None = None,
        accept: Collection[int] = (),
    ) -> tuple[FetchResponse, bytes]:
        """``open`` and read the whole body, retried as ``retry`` says; answers response and body.

        Raises:
            DownloadError: as ``open``, after the retries are spent.
        """

        def attempt(_: int) -> tuple[FetchResponse, bytes]:
            with self.open(url, headers, credential=credential, max_bytes=max_bytes, accept=accept) as r:
                return r, r.read()

        return self.retry(url, attempt)

    def retry(self, url: str, op: Callable[[int], T]) -> T:
        """Run ``op(attempt)`` until it returns, retrying a retryable ``DownloadError``.

        Waits ``Retry-After`` when the server asked (within ``config.retry_after_max``), else
        ``config.backoff(attempt)``; at most ``config.retries`` further attempts
        (``config.unresolved_retries`` when the host's name did not resolve, ``config.refused_retries``
        when the connection was refused).

        Raises:
            DownloadError: the last error, marked with the number of attempts made.
        """
        attempt = 0
        outer = getattr(self._waiting, "since", None)  # a retry inside a retry shares its deadline
        if outer is None:
            self._waiting.since = time.monotonic()
        try:
            while True:
                try:
                    return op(attempt)
                except DownloadError as e:
                    limit = self._retries_for(e)
                    if not e.retryable or attempt >= limit:
                        e.gave_up(attempt + 1)
                        raise
                    delay = e.retry_after if e.retry_after is not None else self.config.backoff(attempt)
                    idle = time.monotonic() - self._waiting.since
                    if idle + delay >= self.config.patience:
                        # one overall deadline: no byte for `patience` seconds, however many attempts
                        e.gave_up(attempt + 1)
                        e.message += (f"; no byte arrived for {idle:.0f} s over {attempt + 1} attempts: "
                                      f"gave up at the overall deadline of {self.config.patience:g} s")
                        raise
                    log.info("%s; retrying in %.1f s", e.message, delay)
                    self._sleep(delay)
                    attempt += 1
        finally:
            if outer is None:
                self._waiting.since = None

    def _retries_for(self, e: DownloadError) -> int:
        """Further attempts a fault is worth: few where waiting cures nothing (a name that does not
        resolve, a connection refused), ``config.retries`` otherwise."""
        if isinstance(e, HostUnreachable):
            return self.config.unresolved_retries
        if isinstance(e, ConnectionRefused):
            return self.config.refused_retries
        return self.config.retries

    def _time_left(self, limit: float) -> float:
        """``limit`` seconds, or fewer when the request being retried is near its overall deadline
        (``config.patience`` without a byte): a stalled server costs one deadline, not one per attempt."""
        since: float | None = getattr(self._waiting, "since", None)
        if since is None:
            return limit
        return max(0.1, min(limit, self.config.patience - (time.monotonic() - since)))

    def _got_bytes(self) -> None:
        """A byte arrived: the request's time without one starts again."""
        if getattr(self._waiting, "since", None) is not None:
            self._waiting.since = time.monotonic()

    # -- rules written once -----------------------------------------------------------------------

    def _call(self, url: str, headers: Mapping[str, str]) -> FetchResponse:
        with self._count_lock:
            self.requests_made += 1
        log.debug("GET %s", url)
        try:
            return self._fetch(url, headers)
        except (DownloadError, OfflineMissing):
            raise
        except socket.gaierror as e:
            raise HostUnreachable(url, urlsplit(url).hostname or url, e.strerror or str(e)) from e
        except ConnectionRefusedError as e:
            raise ConnectionRefused(url, _address(url)) from e
        except OSError as e:
            raise DownloadError(url, f"connection failed: {e}", retryable=True) from e
        except Exception as e:
            raise DownloadError(url, f"request failed: {e}") from e

    def _check_url(self, url: str, *, redirected_from: str | None) -> None:
        scheme = urlsplit(url).scheme.lower()
        if scheme not in self.schemes or (redirected_from and scheme == "file"):
            via = f" (redirected from {redirected_from})" if redirected_from else ""
            raise DownloadError(url, f"{scheme or 'no'}:// URLs are not fetched here{via}")
        if scheme == "http" and not (is_loopback(url) or origin_of(url) in self.plain_http_origins):
            via = f", redirected from {redirected_from}" if redirected_from else ""
            raise DownloadError(
                url,
                f"refusing plain http:// to a host not named as a mirror{via}",
                fix="use an https:// URL, or name that server with --mirror",
            )

    def _check_status(self, r: FetchResponse, accept: Collection[int], credential: Credential | None) -> None:
        status = r.status
        if 200 <= status < 300 or status == 304 or status in accept:
            return
        now = self._clock()
        retry_after = parse_retry_after(r.headers.get("retry-after"), now=now)
        remaining = r.headers.get("x-ratelimit-remaining")
        if status == 429 or (status == 403 and (remaining == "0" or retry_after is not None)):
            reset_at = _int_or_none(r.headers.get("x-ratelimit-reset"))
            wait = retry_after
            if wait is None and reset_at is not None and remaining == "0":
                wait = max(0.0, reset_at - now)
            retryable = wait is None or wait <= self.config.retry_after_max
            r.close()
            raise RateLimited(
                r.url,
                status=status,
                reset_at=float(reset_at) if reset_at is not None else None,
                retry_after=wait,
                limit=_int_or_none(r.headers.get("x-ratelimit-limit")),
                retryable=retryable,
                authenticated=credential is not None and origin_of(r.url) == credential.origin,
                now=now,
            )
        detail = _error_detail(r)
        r.close()
        if status >= 500 or status == 408:
            # a 503 may say when to come back; waited within retry_after_max, else backoff
            wait = retry_after if retry_after is not None and retry_after <= self.config.retry_after_max else None
            raise DownloadError(r.url, f"HTTP {status}{detail}", status=status, retryable=True, retry_after=wait)
        if status == 401:
            raise DownloadError(
                r.url,
                f"HTTP 401 unauthorized{detail}",
                status=status,
                fix="check GITHUB_TOKEN / GH_TOKEN, or unset it for public releases",
            )
        if status == 404:
            raise DownloadError(r.url, f"not found (HTTP 404){detail}", status=status)
        raise DownloadError(r.url, f"HTTP {status}{detail}", status=status)

    def _capped(self, r: FetchResponse, cap: int) -> FetchResponse:
        length = _int_or_none(r.headers.get("content-length"))
        if length is not None and length > cap:
            r.close()
            raise SizeExceeded(r.url, cap, length)
        return FetchResponse(r.url, r.status, r.headers, self._guard(r, cap), r.close)

    def _guard(self, r: FetchResponse, cap: int) -> Iterator[bytes]:
        received = 0
        # A trickle (a byte now and then) never trips a read timeout; like curl's --speed-limit,
        # each stall_timeout window must bring stall_min_bytes.
        window, window_start = self.config.stall_timeout, time.monotonic()
        window_bytes = 0
        try:
            for chunk in r:
                received += len(chunk)
                if received > cap:
                    raise SizeExceeded(r.url, cap, received)
                window_bytes += len(chunk)
                if chunk:
                    self._got_bytes()
                now = time.monotonic()
                if now - window_start >= window:
                    if window_bytes < self.config.stall_min_bytes:
                        raise DownloadStalled(r.url, window, received=received, trickle=window_bytes)
                    window_start, window_bytes = now, 0
                yield chunk
        except DownloadError:
            raise
        except OSError as e:
            raise DownloadError(r.url, f"connection broken after {received} bytes: {e}", retryable=True) from e
        except Exception as e:
            raise DownloadError(r.url, f"transfer failed after {received} bytes: {e}") from e
        finally:
            r.close()


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _error_detail(r: FetchResponse) -> str:
    """A short reason from an error body (GitHub's JSON ``message``), best effort."""
    from superfluid.runtime.jsonread import loads

    try:
        body = b""
        for chunk in r:
            body += chunk
            if len(body) >= 2048:
                break
        text = body.decode("utf-8", "replace")  # a label only: a stray byte does not hide the message
        message = loads(text, max_bytes=len(text)).get("message") if body else None
    except Exception:
        return ""
    return f": {str(message)[:200]}" if isinstance(message, str) and message else ""


class _NoAuth:
    """Tells requests not to add credentials of its own (``.netrc``, URL userinfo)."""

    def __call__(self, r: Any) -> Any:
        return r


class RequestsFetcher(Fetcher):
    """``http(s)://`` through ``requests``: proxies and CA bundles as it reads them from the environment.

    One ``requests.Session`` per thread (sessions are not thread-safe); connections kept alive.
    Bodies are read raw: no content decoding unless the caller asked for an encoding.
    """

    def __init__(self, config: FetchConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            import requests

            session = requests.Session()
            self._local.session = session
            with self._sessions_lock:
                self._sessions.append(session)
        return session

    def close(self) -> None:
        with self._sessions_lock:
            sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
        self._local = threading.local()

    def _fetch(self, url: str, headers: Mapping[str, str]) -> FetchResponse:
        import requests
        import urllib3.exceptions

        cfg = self.config
        connect_timeout, stall_timeout = self._time_left(cfg.connect_timeout), self._time_left(cfg.stall_timeout)
        try:
            r = self._session().get(
                url,
                headers=dict(headers),
                stream=True,
                allow_redirects=False,
                timeout=(connect_timeout, stall_timeout),
                auth=_NoAuth(),
            )
        except requests.exceptions.ConnectTimeout as e:
            raise DownloadError(url, f"could not connect within {connect_timeout:g} s", retryable=True) from e
        except requests.exceptions.ReadTimeout as e:
            raise DownloadStalled(url, stall_timeout) from e
        except requests.exceptions.SSLError as e:
            raise DownloadError(
                url,
                f"TLS failed: {e}",
                fix="if a proxy re-signs traffic, point REQUESTS_CA_BUNDLE at its CA certificate",
            ) from e
        except requests.exceptions.ConnectionError as e:
            unresolved = _unresolved(e)
            if unresolved is not None:
                raise HostUnreachable(url, urlsplit(url).hostname or url, unresolved) from e
            if _refused(e):
                raise ConnectionRefused(url, _address(url)) from e
            raise DownloadError(url, f"could not connect: {_reason(e)}", retryable=True) from e
        except requests.exceptions.RequestException as e:
            raise DownloadError(url, f"request failed: {e}") from e

        decode = headers.get("Accept-Encoding", "identity") != "identity"

        def chunks() -> Iterator[bytes]:
            received = 0
            # read1 hands over bytes as they arrive: a stall then loses nothing already received
            # (a partial resumes from it) and progress moves smoothly. urllib3 < 2 lacks it.
            read1 = getattr(r.raw, "read1", None)
            try:
                if read1 is None:
                    for chunk in r.raw.stream(cfg.chunk_size, decode_content=decode):
                        received += len(chunk)
                        yield chunk
                    return
                while chunk := read1(cfg.chunk_size, decode_content=decode):
                    received += len(chunk)
                    yield chunk
            except (urllib3.exceptions.ReadTimeoutError, requests.exceptions.ReadTimeout) as e:
                raise DownloadStalled(url, stall_timeout, received=received) from e
            except (urllib3.exceptions.HTTPError, requests.exceptions.RequestException, OSError) as e:
                raise DownloadError(
                    url, f"connection broken after {received} bytes: {_reason(e)}", retryable=True
                ) from e

        return FetchResponse(url, r.status_code, Headers(r.headers), chunks(), r.close)


def _chain(e: BaseException) -> Iterator[BaseException]:
    """``e`` and every exception it wraps (requests wraps urllib3 wraps the socket error)."""
    seen: set[int] = set()
    todo: list[BaseException] = [e]
    while todo:
        cur = todo.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo += [x for x in (*cur.args, getattr(cur, "reason", None), cur.__cause__, cur.__context__)
                 if isinstance(x, BaseException)]


def _unresolved(e: BaseException) -> str | None:
    """The resolver's words when a requests/urllib3 connection error is a host name that did not
    resolve (DNS), else None."""
    found: str | None = None
    for cur in _chain(e):
        if isinstance(cur, socket.gaierror):
            return cur.strerror or str(cur)
        if type(cur).__name__ == "NameResolutionError":  # urllib3 2: wraps the gaierror
            found = found or _reason(cur)
    return found


def _refused(e: BaseException) -> bool:
    """Whether a requests/urllib3 connection error is a refused connection (nothing listens)."""
    return any(isinstance(cur, ConnectionRefusedError) for cur in _chain(e))


def _address(url: str) -> str:
    """``host:port`` of ``url``, the port its scheme's default when none is written."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.hostname}:{port or (443 if parts.scheme == 'https' else 80)}"


def _reason(e: BaseException) -> str:
    """The innermost useful words of a requests/urllib3 exception chain."""
    for _ in range(8):  # requests wraps urllib3 wraps the socket error
        inner = e.args[0] if e.args and isinstance(e.args[0], BaseException) else getattr(e, "reason", None)
        if not isinstance(inner, BaseException):
            break
        e = inner
    text = e.args[0] if e.args and isinstance(e.args[0], str) else str(e)
    for sep in ("): ", ">: "):  # "HTTPConnection(host=..., port=...): Failed to establish ..."
        if sep in text:
            text = text.split(sep, 1)[1]
    return text


class FileFetcher(Fetcher):
    """``file://`` URLs (a mirror directory), answering as a static HTTP server would.

    ``ETag`` from inode, mtime and size; ``Range: bytes=N-`` honoured with 206 (and ``If-Range``);
    a missing file is a 404.
    """

    schemes = frozenset({"file"})

    def _fetch(self, url: str, headers: Mapping[str, str]) -> FetchResponse:
        path = path_of_file_url(url)
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed by the response
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return FetchResponse(url, 404, {"content-length": "0"}, iter(()))
        except OSError as e:
            raise DownloadError(url, f"cannot read {path}: {e.strerror or e}") from e
        import email.utils

        st = os.fstat(f.fileno())
        etag = '"' + hashlib.sha256(f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}".encode()).hexdigest()[:32] + '"'
        modified = email.utils.formatdate(st.st_mtime, usegmt=True)
        out = {"etag": etag, "accept-ranges": "bytes", "last-modified": modified}
        if _header(headers, "If-None-Match") == etag:
            f.close()
            return FetchResponse(url, 304, out, iter(()))
        start = _range_start(headers)
        if_range = _header(headers, "If-Range")
        status = 200
        if start is not None and (if_range is None or if_range == etag):
            if start >= st.st_size:
                f.close()
                out.update({"content-range": f"bytes */{st.st_size}", "content-length": "0"})
                return FetchResponse(url, 416, out, iter(()))
            status = 206
            f.seek(start)
            out["content-range"] = f"bytes {start}-{st.st_size - 1}/{st.st_size}"
            out["content-length"] = str(st.st_size - start)
        else:
            out["content-length"] = str(st.st_size)
        size = self.config.chunk_size

        def chunks() -> Iterator[bytes]:
            with f:
                while block := f.read(size):
                    yield block

        return FetchResponse(url, status, out, chunks(), f.close)


def path_of_file_url(url: str) -> str:
    """The local path a ``file://`` URL names (``file:///a/b`` → ``/a/b``)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise DownloadError(url, "file:// URLs must name a local path (file:///...)")
    return unquote(parts.path)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def _range_start(headers: Mapping[str, str]) -> int | None:
    value = _header(headers, "Range")
    if not value or not value.startswith("bytes=") or not value.endswith("-"):
        return None
    first = value[len("bytes=") : -1]
    return int(first) if first.isdigit() else None


class NoNetworkFetcher(Fetcher):
    """Refuses every request without opening a connection (``--offline``'s backstop)."""

    schemes = frozenset({"https", "http", "file"})

    def _fetch(self, url: str, headers: Mapping[str, str]) -> FetchResponse:
        raise OfflineMissing("copy of this URL", url=url)
