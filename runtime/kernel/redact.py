"""Credentials in URLs are never stored or shown: whatever keeps or shows a URL drops its userinfo."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["redact_url", "split_userinfo", "redact_text"]

# scheme://userinfo@ — up to the last '@' before the path, query or fragment, as urlsplit (and so the
# credential sent) splits it: an unquoted '@' in a password stays inside the userinfo
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]+)@")


def redact_url(url: str) -> str:
    """``url`` without its userinfo (``user:password@``); anything else as given."""
    return _USERINFO.sub(lambda m: m.group("scheme"), url, count=1) if "@" in url else url


def redact_text(text: str) -> str:
    """``text`` with the userinfo of every URL in it dropped (a message naming a URL)."""
    return _USERINFO.sub(lambda m: m.group("scheme"), text) if "@" in text else text


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """``(url without userinfo, user, password)``; user and password unquoted, None when absent.

    >>> split_userinfo("https://u%40x:p%3Aw@h.example:8443/r/")
    ('https://h.example:8443/r/', 'u@x', 'p:w')
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return clean, user, password
