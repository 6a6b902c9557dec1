"""URLs as the network seam reads them: an origin (the scope of a credential and of plain ``http://``),
a ``host:port``, whether a URL names this machine, the local path of a ``file://`` URL, and the wait a
``Retry-After`` header asks for."""

from __future__ import annotations

import email.utils
import ipaddress
from urllib.parse import unquote, urlsplit

from superfluid.installer.errors import DownloadError

__all__ = ["origin_of", "address_of", "is_loopback", "parse_retry_after", "path_of_file_url"]


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


def address_of(url: str) -> str:
    """``host:port`` of ``url``, the port its scheme's default when none is written.

    >>> address_of("https://mirror.example/x")
    'mirror.example:443'
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.hostname}:{port or (443 if parts.scheme == 'https' else 80)}"


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
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


def path_of_file_url(url: str) -> str:
    """The local path a ``file://`` URL names (``file:///a/b`` → ``/a/b``)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise DownloadError(url, "file:// URLs must name a local path (file:///...)")
    return unquote(parts.path)
