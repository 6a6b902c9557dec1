"""GitHub releases: the API client, and a release listing read page by page (GitHub's or a mirror's).

See docs/install.md, "Tokens and GitHub".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from superfluid.installer.cache.conditional import cached_get, linked_pages
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import DEFAULT_GITHUB_API, FetchConfig
from superfluid.installer.errors import DownloadError, ProvenanceRefused, ReleaseNotFound, SizeExceeded
from superfluid.installer.sources.bundles import ANSWER_MAX, BUNDLES_EXAMINED, Bundles, attestations, unless_absent
from superfluid.installer.sources.release import MAX_RELEASES, Asset, Release, parse_release, parse_releases
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import Credential
from superfluid.installer.transport.urls import is_loopback, origin_of
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = [
    "GitHubClient",
    "list_pages",
    "check_repo",
    "token_from",
    "web_base_for",
]

log = logging.getLogger(__name__)

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ACCEPT_JSON = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "Accept-Encoding": "gzip",
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


def token_from(*values: str | None) -> str | None:
    """The API token: the first of ``values`` set and not blank, stripped; the face gives ``GH_TOKEN``,
    then ``GITHUB_TOKEN`` (as the ``gh`` command orders them)."""
    for value in values:
        if value and value.strip():
            return value.strip()
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


# -- a listing, page by page ----------------------------------------------------------------------


def _load_json(body: bytes, where: str) -> Any:
    try:  # within the body's own (already capped) size, a depth cap, strict UTF-8 (runtime/jsonread)
        return loads(body, max_bytes=max(len(body), 1))
    except UntrustedJson as e:
        fault = f"it {e.fault}" if e.fault.startswith("is ") else e.fault
        raise BadFile(where, f"not valid JSON: {fault}",
                      advice="the source answered something else than a listing") from None


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
    (``linked_pages``; a malformed entry skipped, ``warn`` told: see ``parse_releases``).

    Stops after ``config.listing_max_pages`` pages (logged), keeping the newest.

    Raises:
        BadFile: a page that is not a listing, or a ``next`` link to another host.
        OfflineMissing, DownloadError: as ``cached_get``.
    """
    releases: list[Release] = []
    seen = 0
    pages = linked_pages(first_url, fetcher=fetcher, cache=cache, max_pages=config.listing_max_pages,
                         max_bytes=config.listing_max_bytes, headers=headers, credential=credential,
                         offline=offline, what="release listing")
    for page, got in enumerate(pages):
        try:
            data = _load_json(got.body, got.url)
            releases.extend(parse_releases(data, where=got.url, url_for=url_for, offset=0, warn=warn))
        except BadFile:
            cache.http.drop_http(got.url)  # never revalidate a broken page into a 304 that keeps it
            raise
        seen += len(data) if isinstance(data, list) else 0
        if seen > MAX_RELEASES:
            raise BadFile(first_url, f"lists more than {MAX_RELEASES} releases over {page + 1} pages, more than "
                          "superfluid reads from one listing: not a release listing")
        if got.link_next is None:
            return releases
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
                                      advice="check the repository name, or set GITHUB_TOKEN for a private one") from e
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
                                      advice="check the tag; the listing shows the published ones") from e
            raise
        try:
            release = parse_release(_load_json(got.body, url), where=url)
        except BadFile:
            self.cache.http.drop_http(url)
            raise
        if release.draft:
            raise ReleaseNotFound(repo, f"release {tag} (a draft)", where=self.api_base)
        return release

    def attestations_url(self, repo: str, sha256: str) -> str:
        """GitHub's attestations of the file whose digest is ``sha256`` in ``repo`` (the first
        ``BUNDLES_EXAMINED`` of them).

        Raises:
            ValueError: ``repo`` is not ``owner/name``.
        """
        owner, name = check_repo(repo)
        return (f"{self.api_base}/repos/{_segment(owner)}/{_segment(name)}/attestations/sha256:{sha256}"
                f"?per_page={BUNDLES_EXAMINED}")

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        """The Sigstore bundles GitHub's attestations API holds for ``sha256`` in ``repo`` (``Attested``):
        none when it answers 404 (no attestation, or a GitHub without the API), or offline with no
        answer cached. Cached as a listing is (``ETag``), so an offline install reads it again.

        Raises:
            ProvenanceRefused: an answer larger than ``ANSWER_MAX`` or that is not one.
            RateLimited, DownloadError: as ``releases``.
        """
        url = self.attestations_url(repo, sha256)
        try:
            got = unless_absent(lambda: cached_get(
                url, fetcher=self.fetcher, cache=self.cache, max_bytes=ANSWER_MAX, headers=_ACCEPT_JSON,
                credential=self.credential, offline=self.offline, what="attestations answer"))
        except SizeExceeded:
            raise ProvenanceRefused(url, "bundle", f"answered more than {ANSWER_MAX} bytes: not an attestations "
                                                   "answer superfluid reads") from None
        if got is None:
            return Bundles((), url)
        try:
            return attestations(got.body, url)
        except ProvenanceRefused:
            self.cache.http.drop_http(url)  # never revalidate a broken answer into a 304 that keeps it
            raise
