"""Conditional GETs through the HTTP cache (``ETag``, ``Last-Modified``) and ``Link: rel="next"`` paging.

See docs/install.md, "Mirrors".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from superfluid.installer.cache.http_index import HttpEntry
from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import DownloadError, OfflineMissing
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import Credential
from superfluid.installer.transport.urls import origin_of
from superfluid.runtime.kernel.errors import BadFile

__all__ = ["CachedBody", "cached_get", "linked_pages", "parse_link_next"]

log = logging.getLogger(__name__)

_LINK = re.compile(r'<([^>]*)>\s*((?:;\s*[^;,]+)*)')


def parse_link_next(value: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, or ``None``.

    >>> parse_link_next('<https://a/x?page=2>; rel="next", <https://a/x?page=5>; rel="last"')
    'https://a/x?page=2'
    """
    if not value:
        return None
    for m in _LINK.finditer(value):
        params = m.group(2)
        for param in params.split(";"):
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "rel" and "next" in val.strip().strip('"').lower().split():
                return m.group(1)
    return None


@dataclass(frozen=True, slots=True)
class CachedBody:
    """A body and where it came from: ``status`` 200 (fresh), 304 (revalidated) or 0 (offline)."""

    url: str
    body: bytes
    status: int
    link_next: str | None
    entry: HttpEntry | None


def cached_get(
    url: str,
    *,
    fetcher: Fetcher,
    cache: Cache,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    credential: Credential | None = None,
    offline: bool = False,
    what: str = "copy of",
) -> CachedBody:
    """GET ``url`` conditionally: ``If-None-Match``/``If-Modified-Since`` from the cache; a 304
    answers the cached body (no body crosses the wire); a 200 replaces the cache entry.
    ``offline`` answers the cached body or raises, without calling the fetcher.

    Raises:
        OfflineMissing: offline and nothing cached for ``url``.
        DownloadError: as ``Fetcher.open`` (after retries).
    """
    entry = cache.http.http_entry(url)
    cached = cache.http.http_body(entry, max_bytes=max_bytes) if entry is not None else None
    if offline:
        if entry is None or cached is None:
            raise OfflineMissing(f"{what} {url}".strip(), url=None)
        return CachedBody(url, cached, 0, entry.link_next, entry)
    send = dict(headers or {})
    if entry is not None and cached is not None:
        if entry.etag:
            send["If-None-Match"] = entry.etag
        if entry.last_modified:
            send["If-Modified-Since"] = entry.last_modified
    response, body = fetcher.get_bytes(url, max_bytes=max_bytes, headers=send, credential=credential)
    if response.status == 304:
        if entry is None or cached is None:
            raise DownloadError(url, "HTTP 304 to a request that was not conditional", status=304)
        log.debug("%s: not modified", url)
        return CachedBody(url, cached, 304, entry.link_next, entry)
    link_next = parse_link_next(response.headers.get("link"))
    entry = cache.http.put_http_body(
        url, body, etag=response.headers.get("etag"), last_modified=response.headers.get("last-modified"),
        link_next=link_next,
    )
    return CachedBody(url, body, response.status, link_next, entry)


def linked_pages(
    first_url: str,
    *,
    fetcher: Fetcher,
    cache: Cache,
    max_pages: int,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    credential: Credential | None = None,
    offline: bool = False,
    what: str = "copy of",
) -> Iterator[CachedBody]:
    """Each page of a paginated answer, each by ``cached_get``, following ``Link: rel="next"``
    within ``first_url``'s origin, for at most ``max_pages`` pages.

    A page whose ``link_next`` is ``None`` is the last. The next page is asked for only when the
    caller takes it, so a caller that refuses a page stops the paging there.

    Raises:
        BadFile: a ``next`` link to another host.
        OfflineMissing, DownloadError: as ``cached_get``.
    """
    url = first_url
    for page in range(max_pages):
        got = cached_get(url, fetcher=fetcher, cache=cache, max_bytes=max_bytes, headers=headers,
                         credential=credential, offline=offline, what=what)
        yield got
        if got.link_next is None:
            return
        url = got.link_next
        if origin_of(url) != origin_of(first_url):
            raise BadFile(first_url, f"page {page + 1} links its next page to another host: {url}")
