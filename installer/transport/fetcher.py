"""The network seam: one abstract method (an ``HttpRequest`` in, a ``FetchResponse`` out: a status,
headers and byte chunks; the values in ``messages.py``); the rules of every method written once in
the base class, with the errors an answer's status is. See docs/install.md, "Mirrors".
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

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
from superfluid.installer.transport.messages import Body, Credential, FetchResponse, HttpRequest, Upload
from superfluid.installer.transport.urls import address_of, is_loopback, origin_of, parse_retry_after
from superfluid.runtime.kernel.jsonread import loads

__all__ = ["Fetcher", "status_error"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: redirects that keep the method and the body (RFC 9110 15.4.8, 15.4.9): the only ones a request
#: with a body follows; a 301, 302 or 303 to one is its answer (an error status, as any other)
_KEEP_METHOD = frozenset({307, 308})
_NO_BODY_METHODS = frozenset({"GET", "HEAD"})
#: the bytes of an error answer read for its message
_ERROR_BODY_BYTES = 2048


class Fetcher(ABC):
    """The seam. Implementations answer ``_send``: one hop (method, URL, headers, body) answered with a
    status, headers and byte chunks, no redirect followed, no status judged (``requests_fetcher``,
    ``files``). Callers use ``request``, ``open``, ``get_bytes`` and ``retry``, and every
    rule is here, for every method: the schemes and plain ``http://``, redirects (a credential only at
    its own origin), statuses, the size cap and the stall rule on every answer's body, retries under
    one overall deadline. A wrapper (the OCI registry client) composes a fetcher and sends through its
    ``request``; ``send`` is one hop, for a wrapper that is a fetcher itself.

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
        self.requests_made = 0  # hops sent so far (the benchmark counts warm listings)

    @abstractmethod
    def _send(self, request: HttpRequest) -> FetchResponse:
        """One hop: ``request`` with exactly its headers and body; no redirect followed, no status
        judged; the body streamed (none for ``HEAD``).

        Raises:
            DownloadError: a transport fault, ``retryable`` when another attempt may help
                (connection refused or reset, stall as ``DownloadStalled``).
        """

    def close(self) -> None:  # noqa: B027 - optional hook, most fetchers hold nothing
        """Release pooled connections (no-op by default)."""

    # -- one request, redirects by hand ---------------------------------------------------------

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        body: Body | None = None,
        credential: Credential | None = None,
        max_bytes: int | None = None,
        accept: Collection[int] = (),
    ) -> FetchResponse:
        """``method`` ``url``, following redirects, and answer a 2xx, a 304 or a status in ``accept``.

        A ``GET`` or ``HEAD`` follows every redirect; a request with a body follows ``307`` and
        ``308`` only (the same method and body, sent again). ``credential`` is attached only to
        hops at its origin. The answer's body is capped at ``max_bytes`` (``None``:
        ``config.max_download_bytes``), held to the stall rule, and every fault while reading it
        is a ``DownloadError``.

        Raises:
            RateLimited: 429, or 403 with ``X-RateLimit-Remaining: 0`` or a ``Retry-After``.
            DownloadError: any other status, a refused scheme, too many redirects, transport.
            SizeExceeded: ``Content-Length`` or the body beyond ``max_bytes``.
        """
        method = method.upper()
        cap = self.config.max_download_bytes if max_bytes is None else max_bytes
        credential = credential or self.credential
        current = url
        for hop in range(self.config.max_redirects + 1):
            self._check_url(current, redirected_from=url if hop else None)
            send = {k: v for k, v in (headers or {}).items() if k.lower() != "authorization"}
            send.setdefault("User-Agent", self.config.user_agent)
            if credential is not None and origin_of(current) == credential.origin:
                send["Authorization"] = credential.authorization
            if isinstance(body, Upload):
                body.rewind()  # sent again whole: a redirect, an attempt after a challenge
            response = self.send(HttpRequest(method, current, send, body))
            if response.status in _REDIRECTS and response.status not in accept and (
                    (method in _NO_BODY_METHODS and body is None) or response.status in _KEEP_METHOD):
                location = response.headers.get("location")
                response.close()
                if not location:
                    raise DownloadError(current, f"HTTP {response.status} redirect without a Location")
                log.debug("%s redirects to %s", current, location)
                current = urljoin(current, location)
                continue
            self._check_status(response, accept, credential)
            return self._capped(response, cap, head=method == "HEAD")
        raise DownloadError(url, f"more than {self.config.max_redirects} redirects")

    def open(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        credential: Credential | None = None,
        max_bytes: int | None = None,
        accept: Collection[int] = (),
    ) -> FetchResponse:
        """``GET`` ``url``: ``request`` with its rules.

        Raises:
            as ``request``.
        """
        return self.request("GET", url, headers, credential=credential, max_bytes=max_bytes, accept=accept)

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

    def retrying(self) -> bool:
        """Whether this thread is inside ``retry`` (a request made now is one attempt of it)."""
        return getattr(self._waiting, "since", None) is not None

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

    def send(self, request: HttpRequest) -> FetchResponse:
        """One hop through this fetcher's transport, counted, its faults as ``DownloadError``: no
        rule applied (``request`` applies them).

        Raises:
            DownloadError, OfflineMissing: the transport failed.
        """
        with self._count_lock:
            self.requests_made += 1
        log.debug("%s %s", request.method, request.url)
        url = request.url
        try:
            return self._send(request)
        except (DownloadError, OfflineMissing):
            raise
        except socket.gaierror as e:
            raise HostUnreachable(url, urlsplit(url).hostname or url, e.strerror or str(e)) from e
        except ConnectionRefusedError as e:
            raise ConnectionRefused(url, address_of(url)) from e
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
                advice="use an https:// URL, or name that server with --mirror",
            )

    def _check_status(self, r: FetchResponse, accept: Collection[int], credential: Credential | None) -> None:
        status = r.status
        if 200 <= status < 300 or status == 304 or status in accept:
            return
        now = self._clock()
        try:  # a rate limit's words are its headers'; any other error's, the start of its body
            detail = "" if _rate_limited(status, r.headers, now) else _error_detail(self._guard(r, 1 << 62))
        finally:
            r.close()
        raise status_error(r.url, status, r.headers, detail, config=self.config, now=now,
                           authenticated=credential is not None and origin_of(r.url) == credential.origin)

    def _capped(self, r: FetchResponse, cap: int, *, head: bool = False) -> FetchResponse:
        length = None if head else _int_or_none(r.headers.get("content-length"))  # a HEAD's is the GET's
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


def status_error(url: str, status: int, headers: Mapping[str, str], detail: str, *, config: FetchConfig,
                 now: float, authenticated: bool) -> DownloadError:
    """The error an answer of ``status`` is: ``RateLimited`` for 429 (or a 403 that says so), a
    retryable one for 5xx and 408 (waiting ``Retry-After`` within ``config.retry_after_max``), the
    fix for a 401, else the status; ``detail`` (``: message``) from the answer's body."""
    retry_after = parse_retry_after(headers.get("retry-after"), now=now)
    remaining = headers.get("x-ratelimit-remaining")
    if _rate_limited(status, headers, now):
        reset_at = _int_or_none(headers.get("x-ratelimit-reset"))
        wait = retry_after
        if wait is None and reset_at is not None and remaining == "0":
            wait = max(0.0, reset_at - now)
        return RateLimited(
            url,
            status=status,
            reset_at=float(reset_at) if reset_at is not None else None,
            retry_after=wait,
            limit=_int_or_none(headers.get("x-ratelimit-limit")),
            retryable=wait is None or wait <= config.retry_after_max,
            authenticated=authenticated,
            now=now,
        )
    if status >= 500 or status == 408:
        # a 503 may say when to come back; waited within retry_after_max, else backoff
        wait = retry_after if retry_after is not None and retry_after <= config.retry_after_max else None
        return DownloadError(url, f"HTTP {status}{detail}", status=status, retryable=True, retry_after=wait)
    if status == 401:
        return DownloadError(
            url,
            f"HTTP 401 unauthorized{detail}",
            status=status,
            advice="check GITHUB_TOKEN / GH_TOKEN, or unset it for public releases",
        )
    if status == 404:
        return DownloadError(url, f"not found (HTTP 404){detail}", status=status)
    return DownloadError(url, f"HTTP {status}{detail}", status=status)


def _rate_limited(status: int, headers: Mapping[str, str], now: float) -> bool:
    """429, or a 403 with ``X-RateLimit-Remaining: 0`` or a ``Retry-After``."""
    if status == 429:
        return True
    return status == 403 and (headers.get("x-ratelimit-remaining") == "0"
                              or parse_retry_after(headers.get("retry-after"), now=now) is not None)


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _error_detail(chunks: Iterable[bytes]) -> str:
    """A short reason from the start of an error body (GitHub's JSON ``message``), best effort."""
    try:
        body = b""
        for chunk in chunks:
            body += chunk
            if len(body) >= _ERROR_BODY_BYTES:
                break
        text = body.decode("utf-8", "replace")  # a label only: a stray byte does not hide the message
        message = loads(text, max_bytes=len(text)).get("message") if body else None
    except Exception:
        return ""
    return f": {str(message)[:200]}" if isinstance(message, str) and message else ""
