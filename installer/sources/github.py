"""GitHub releases: the listing client and the release facts it answers.

See docs/install.md, "Tokens and GitHub".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from superfluid.installer.cache.blobs import Cache, HttpEntry
from superfluid.installer.config import DEFAULT_GITHUB_API, FetchConfig
from superfluid.installer.errors import DownloadError, OfflineMissing, ReleaseNotFound
from superfluid.installer.transport.fetcher import Credential, Fetcher, is_loopback, origin_of
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = [
    "MAX_RELEASES",
    "Asset",
    "Release",
    "GitHubClient",
    "CachedBody",
    "cached_get",
    "list_pages",
    "parse_asset",
    "parse_releases",
    "parse_release",
    "parse_link_next",
    "check_repo",
    "token_from",
    "web_base_for",
]

log = logging.getLogger(__name__)

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})")
_ACCEPT_JSON = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "Accept-Encoding": "gzip",
}


@dataclass(frozen=True, slots=True)
class Asset:
    """One file of a release, as listed."""

    name: str
    url: str  # where its bytes are fetched (browser_download_url, or the mirror's path)
    size: int | None  # declared bytes
    digest: str | None = None  # "sha256:<hex>" as the listing states it, or None

    @property
    def sha256(self) -> str | None:
        """The listed SHA-256 hex (lower case), if the listing gives one."""
        m = _DIGEST.fullmatch(self.digest or "")
        return m.group(1).lower() if m else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "size": self.size, "digest": self.digest}


@dataclass(frozen=True, slots=True)
class Release:
    """One published release (never a draft)."""

    tag: str  # "v0.4.0", "b11642"
    version: str  # the tag without a leading "v" before a digit: "0.4.0", "b11642"
    name: str
    draft: bool
    prerelease: bool
    published_at: str | None  # ISO 8601 as listed
    assets: tuple[Asset, ...] = field(default=())

    def asset(self, name: str) -> Asset | None:
        """The asset called ``name``, or ``None``."""
        return next((a for a in self.assets if a.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "version": self.version,
            "name": self.name,
            "draft": self.draft,
            "prerelease": self.prerelease,
            "published_at": self.published_at,
            "assets": [a.to_json() for a in self.assets],
        }


def check_repo(repo: str) -> tuple[str, str]:
    """``owner``, ``name`` of ``"owner/name"``.

    Raises:
        ValueError: not of that form (or with ``.``/``..`` as a part).
    """
    if not _REPO.fullmatch(repo) or any(part in (".", "..") for part in repo.split("/")):
        raise ValueError(f"not a GitHub repository of the form owner/name: {repo!r}")
    owner, name = repo.split("/")
    return owner, name


def token_from(environ: Mapping[str, str]) -> str | None:
    """The API token: ``GH_TOKEN``, else ``GITHUB_TOKEN`` (as the ``gh`` command orders them)."""
    for var in ("GH_TOKEN", "GITHUB_TOKEN"):
        value = environ.get(var, "").strip()
        if value:
            return value
    return None


def web_base_for(api_base: str) -> str:
    """Where release downloads live for an API base: ``api.github.com`` → ``github.com``;
    GitHub Enterprise ``https://host/api/v3`` → ``https://host``; anything else (a test server)
    serves downloads under its own base."""
    parts = urlsplit(api_base.rstrip("/"))
    if (parts.hostname or "").lower() == "api.github.com":
        return "https://github.com"
    path = parts.path
    if path.endswith("/api/v3"):
        path = path[: -len("/api/v3")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _segment(text: str) -> str:
    return quote(text, safe="")


# -- parsing (pure) -------------------------------------------------------------------------------

_BAD_NAME = re.compile(r"[/\\\x00-\x1f\x7f]")


def _fault(where: str, json_path: str, fault: str) -> BadFile:
    return BadFile(where, fault, json_path=json_path, fix="the release listing is broken; try again or use --mirror")


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, path: str,
           *, required: bool = True) -> Any:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _fault(where, f"{path}.{key}", f"expected {want}, got {type(value).__name__}")
    return value


def _version_of(tag: str) -> str:
    return tag[1:] if len(tag) > 1 and tag[0] in "vV" and tag[1].isdigit() else tag


def _check_tag(tag: str, where: str, path: str) -> None:
    if not tag or tag.startswith("/") or "\\" in tag or re.search(r"[\x00-\x1f\x7f]", tag) or any(
        part in ("", ".", "..") for part in tag.split("/")
    ):
        raise _fault(where, f"{path}.tag_name", f"not a usable tag: {tag!r}")


def parse_asset(obj: Any, *, where: str, path: str, url_for: Callable[[str], str] | None = None) -> Asset:
    """One asset object (``name``, ``browser_download_url``, ``size``, ``digest``).

    ``url_for(name)`` replaces the listed URL (a mirror answers from its own paths).

    Raises:
        BadFile: a field of the wrong type, a name with a path separator, a malformed digest.
    """
    if not isinstance(obj, dict):
        raise _fault(where, path, f"expected an asset object, got {type(obj).__name__}")
    name = _field(obj, "name", str, where, path)
    if not name or name in (".", "..") or _BAD_NAME.search(name):
        raise _fault(where, f"{path}.name", f"not a usable file name: {name!r}")
    size = _field(obj, "size", int, where, path, required=False)
    if size is not None and size < 0:
        raise _fault(where, f"{path}.size", f"negative size {size}")
    digest = _field(obj, "digest", str, where, path, required=False)
    if digest is not None and digest.lower().startswith("sha256:") and not _DIGEST.fullmatch(digest):
        raise _fault(where, f"{path}.digest", f"malformed sha256 digest {digest!r}")
    if digest is not None and _DIGEST.fullmatch(digest):
        digest = "sha256:" + digest[len("sha256:"):].lower()
    if url_for is not None:
        url = url_for(name)
    else:
        url = _field(obj, "browser_download_url", str, where, path)
        if urlsplit(url).scheme not in ("https", "http"):
            raise _fault(where, f"{path}.browser_download_url", f"not an http(s) URL: {url!r}")
    return Asset(name=name, url=url, size=size, digest=digest)


def parse_release(
    obj: Any, *, where: str, path: str = "$", url_for: Callable[[str, str], str] | None = None
) -> Release:
    """One release object; ``url_for(tag, name)`` replaces asset URLs (a mirror).

    Raises:
        BadFile: a field of the wrong type, an unusable tag, a bad asset.
    """
    if not isinstance(obj, dict):
        raise _fault(where, path, f"expected a release object, got {type(obj).__name__}")
    tag = _field(obj, "tag_name", str, where, path)
    _check_tag(tag, where, path)
    draft = bool(_field(obj, "draft", bool, where, path, required=False))
    prerelease = bool(_field(obj, "prerelease", bool, where, path, required=False))
    name = _field(obj, "name", str, where, path, required=False) or tag
    published = _field(obj, "published_at", str, where, path, required=False)
    # absent: no assets (a hand-written mirror listing); present, it must be a list (`null` is not one)
    raw_assets = _field(obj, "assets", list, where, path) if "assets" in obj else []
    per_asset = (lambda n: url_for(tag, n)) if url_for is not None else None
    assets = tuple(
        parse_asset(a, where=where, path=f"{path}.assets[{i}]", url_for=per_asset) for i, a in enumerate(raw_assets)
    )
    return Release(tag, _version_of(tag), name, draft, prerelease, published, assets)


def parse_releases(
    data: Any, *, where: str, url_for: Callable[[str, str], str] | None = None, offset: int = 0,
    warn: Callable[[str], None] | None = None,
) -> list[Release]:
    """A listing page (a JSON array of release objects), drafts skipped, in listed order.

    A malformed entry (a field of the wrong type, ``assets: null``, an unusable tag or asset) is
    skipped, never trusted in part, and ``warn`` is told which (its JSON path, its tag when it has
    one, and the fault); without ``warn`` it is logged. The other releases are still listed.

    Raises:
        BadFile: not an array, or more than ``MAX_RELEASES`` entries.
    """
    if not isinstance(data, list):
        raise _fault(where, "$", f"expected a JSON array of releases, got {type(data).__name__}")
    if len(data) > MAX_RELEASES:
        raise _fault(where, "$", f"lists {len(data)} releases, more than superfluid reads from one listing "
                                 f"({MAX_RELEASES}): not a release listing")
    releases = []
    skipped = 0
    for i, r in enumerate(data):
        path = f"$[{offset + i}]"
        try:
            releases.append(parse_release(r, where=where, path=path, url_for=url_for))
        except BadFile as e:
            skipped += 1
            if skipped > _MAX_SKIPS_TOLD:
                continue
            tag = r.get("tag_name") if isinstance(r, dict) else None
            named = f"release {tag!r} ({path})" if isinstance(tag, str) and tag else f"release {path}"
            message = f"{where}: {named} skipped: {e.json_path or path}: {e.fault}"
            (warn or log.warning)(message)
    if skipped > _MAX_SKIPS_TOLD:
        (warn or log.warning)(f"{where}: {skipped - _MAX_SKIPS_TOLD} more malformed releases skipped")
    return [r for r in releases if not r.draft]


#: the most entries one listing (a page, or a mirror's whole releases.json) may hold: llama.cpp, the
#: engine with the most releases, has some thousands; a million entries is an attack, refused at once
MAX_RELEASES = 20_000
#: malformed releases named one by one; the rest are counted in one line
_MAX_SKIPS_TOLD = 20


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


def _load_json(body: bytes, where: str) -> Any:

    try:  # within the body's own (already capped) size, a depth cap, strict UTF-8 (runtime/jsonread)
        return loads(body, max_bytes=max(len(body), 1))
    except UntrustedJson as e:
        fault = f"it {e.fault}" if e.fault.startswith("is ") else e.fault
        raise BadFile(where, f"not valid JSON: {fault}",
                      fix="the source answered something else than a listing") from None


# -- conditional GET through the HTTP cache ------------------------------------------------------


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
    entry = cache.http_entry(url)
    cached = cache.http_body(entry, max_bytes=max_bytes) if entry is not None else None
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
    entry = cache.put_http_body(
        url, body, etag=response.headers.get("etag"), last_modified=response.headers.get("last-modified"),
        link_next=link_next,
    )
    return CachedBody(url, body, response.status, link_next, entry)


def list_pages(
    first_url: str,
    *,
    fetcher: Fetcher,
    cache: Cache,
    config: FetchConfig,
    headers: Mapping[str, str] | None = None,
    credential: Credential | None = None,
    offline: bool = False,
    url_for: Callable[[str, str], str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Release]:
    """Every release of a paginated listing, following ``Link: rel="next"`` within one origin
    (a malformed entry skipped, ``warn`` told: see ``parse_releases``).

    Stops after ``config.listing_max_pages`` pages (logged), keeping the newest.

    Raises:
        BadFile: a page that is not a listing, or a ``next`` link to another host.
        OfflineMissing, DownloadError: as ``cached_get``.
    """
    releases: list[Release] = []
    url: str | None = first_url
    seen = 0
    for page in range(config.listing_max_pages):
        assert url is not None
        got = cached_get(url, fetcher=fetcher, cache=cache, max_bytes=config.listing_max_bytes,
                         headers=headers, credential=credential, offline=offline, what="release listing")
        try:
            data = _load_json(got.body, url)
            releases.extend(parse_releases(data, where=url, url_for=url_for, offset=0, warn=warn))
        except BadFile:
            cache.drop_http(url)  # never revalidate a broken page into a 304 that keeps it
            raise
        seen += len(data) if isinstance(data, list) else 0
        if seen > MAX_RELEASES:
            raise BadFile(first_url, f"lists more than {MAX_RELEASES} releases over {page + 1} pages, more than "
                          "superfluid reads from one listing: not a release listing")
        url = got.link_next
        if url is None:
            return releases
        if origin_of(url) != origin_of(first_url):
            raise BadFile(first_url, f"page {page + 1} links its next page to another host: {url}")
    log.warning("%s: stopped after %d pages (%d releases)", first_url, config.listing_max_pages, seen)
    return releases


# -- the client -------------------------------------------------------------------------------------


class GitHubClient:
    """The releases API of one GitHub (or GitHub Enterprise, or test) server.

    Args:
        fetcher: the network seam.
        cache: where conditional-request state and bodies are kept.
        api_base: ``SUPERFLUID_GITHUB_API``, default ``https://api.github.com``.
        token: sent as ``Authorization: Bearer`` to the API origin only (and never over plain
            ``http://`` to another machine).
        web_base: where ``/owner/repo/releases/download/tag/name`` lives (default derived from
            ``api_base`` by ``web_base_for``).
        offline: answer from the cache only; the fetcher is never called.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        cache: Cache,
        *,
        api_base: str = DEFAULT_GITHUB_API,
        token: str | None = None,
        web_base: str | None = None,
        offline: bool = False,
    ) -> None:
        self.fetcher = fetcher
        self.cache = cache
        self.api_base = api_base.rstrip("/")
        self.web_base = (web_base or web_base_for(self.api_base)).rstrip("/")
        self.offline = offline
        #: what listing read so far was not trusted (malformed entries skipped), for the user
        self.warnings: list[str] = []
        self.credential: Credential | None = None
        if token:
            origin = origin_of(self.api_base)
            if origin.startswith("https://") or is_loopback(self.api_base):
                self.credential = Credential(origin, f"Bearer {token}")
            else:
                log.warning("not sending the GitHub token to %s over plain http", origin)

    def describe(self) -> str:
        return f"GitHub releases at {self.api_base}"

    def warn(self, message: str) -> None:
        """Keep a warning about what was read (once)."""
        if message not in self.warnings:
            log.info("%s", message)
            self.warnings.append(message)

    def listing_url(self, repo: str) -> str:
        """The first page of ``repo``'s release listing.

        Raises:
            ValueError: ``repo`` is not ``owner/name``.
        """
        owner, name = check_repo(repo)
        per_page = self.fetcher.config.listing_per_page
        return f"{self.api_base}/repos/{_segment(owner)}/{_segment(name)}/releases?per_page={per_page}"

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        """Where a release asset is downloaded from (``browser_download_url``'s form)."""
        owner, rname = check_repo(repo)
        return f"{self.web_base}/{owner}/{rname}/releases/download/{_segment(tag)}/{_segment(name)}"

    def releases(self, repo: str) -> list[Release]:
        """Every published release of ``repo`` (drafts skipped), in the API's order (newest first).

        Raises:
            ReleaseNotFound: the repository does not exist (HTTP 404).
            RateLimited: the API refused for its rate limit; the message says when it resets.
            OfflineMissing: offline and the listing was never cached.
            BadFile: the listing is not GitHub-shaped.
            DownloadError: any other transfer failure.
        """
        url = self.listing_url(repo)
        try:
            return list_pages(url, fetcher=self.fetcher, cache=self.cache, config=self.fetcher.config,
                              headers=_ACCEPT_JSON, credential=self.credential, offline=self.offline,
                              warn=self.warn)
        except DownloadError as e:
            if e.status == 404:
                raise ReleaseNotFound(repo, "repository", where=self.api_base,
                                      fix="check the repository name, or set GITHUB_TOKEN for a private one") from e
            raise

    def release(self, repo: str, tag: str) -> Release:
        """The published release ``tag`` of ``repo`` (``/releases/tags/{tag}``).

        Raises:
            ReleaseNotFound: no such published release (HTTP 404, or a draft).
            RateLimited, OfflineMissing, BadFile, DownloadError: as ``releases``.
        """
        owner, name = check_repo(repo)
        url = f"{self.api_base}/repos/{_segment(owner)}/{_segment(name)}/releases/tags/{_segment(tag)}"
        try:
            got = cached_get(url, fetcher=self.fetcher, cache=self.cache,
                             max_bytes=self.fetcher.config.listing_max_bytes, headers=_ACCEPT_JSON,
                             credential=self.credential, offline=self.offline, what="release")
        except DownloadError as e:
            if e.status == 404:
                raise ReleaseNotFound(repo, f"release {tag}", where=self.api_base,
                                      fix="check the tag; the listing shows the published ones") from e
            raise
        try:
            release = parse_release(_load_json(got.body, url), where=url)
        except BadFile:
            self.cache.drop_http(url)
            raise
        if release.draft:
            raise ReleaseNotFound(repo, f"release {tag} (a draft)", where=self.api_base)
        return release
