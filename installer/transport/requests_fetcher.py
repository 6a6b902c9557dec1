"""``http(s)://`` through ``requests``, TLS verified as the operating system verifies it (``truststore``).

See docs/install.md, "Company networks: proxies and certificates".
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import ConnectionRefused, DownloadError, DownloadStalled, HostUnreachable
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import FetchResponse, Headers, HttpRequest
from superfluid.installer.transport.urls import address_of

if TYPE_CHECKING:
    import requests

__all__ = ["RequestsFetcher"]


class _NoAuth:
    """Tells requests not to add credentials of its own (``.netrc``, URL userinfo)."""

    def __call__(self, r: Any) -> Any:
        return r


# requests (with urllib3) is imported when a request is first sent, so that a command that opens no
# connection never imports it; proxies (HTTPS_PROXY, NO_PROXY...) and CA bundles (REQUESTS_CA_BUNDLE)
# are read from the environment as requests reads them. Certificates are verified against the
# operating system's store through truststore (what pip does), so that a company's root that IT
# installed in the system is trusted; certifi, requests' own bundle, where truststore is not there.
#: the adapter class, made at the first request (it subclasses requests' own), or None without truststore
_ADAPTERS: dict[str, Any] = {}


def _system_trust_adapter() -> Any:
    """A new ``HTTPAdapter`` whose TLS context is ``truststore``'s (the system's certificate store),
    for one session; None where truststore cannot be imported (then requests verifies with certifi)."""
    if "system" in _ADAPTERS:
        made = _ADAPTERS["system"]
        return made() if made is not None else None
    try:
        import truststore
        from requests.adapters import HTTPAdapter
    except ImportError:
        _ADAPTERS["system"] = None
        return None
    context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    class SystemTrust(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["ssl_context"] = context
            super().init_poolmanager(*args, **kwargs)

        def proxy_manager_for(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["ssl_context"] = context
            return super().proxy_manager_for(*args, **kwargs)

    _ADAPTERS["system"] = SystemTrust
    return SystemTrust()


class RequestsFetcher(Fetcher):
    """``http(s)://`` through ``requests``, every method.

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
            adapter = _system_trust_adapter()
            if adapter is not None:
                session.mount("https://", adapter)
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

    def _send(self, request: HttpRequest) -> FetchResponse:
        import requests
        import urllib3.exceptions

        url, headers = request.url, request.headers
        cfg = self.config
        connect_timeout, stall_timeout = self._time_left(cfg.connect_timeout), self._time_left(cfg.stall_timeout)
        try:
            r = self._session().request(
                request.method,
                url,
                headers=dict(headers),
                data=request.body,
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
                advice="if a proxy re-signs traffic, point REQUESTS_CA_BUNDLE at its CA certificate",
            ) from e
        except requests.exceptions.ConnectionError as e:
            unresolved = _unresolved(e)
            if unresolved is not None:
                raise HostUnreachable(url, urlsplit(url).hostname or url, unresolved) from e
            if _refused(e):
                raise ConnectionRefused(url, address_of(url)) from e
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
