"""A mirror: any static HTTP server or local directory holding releases in GitHub's layout.

See docs/install.md, "Mirrors".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from superfluid.installer.cache.conditional import cached_get
from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import DownloadError, OfflineMissing, ReleaseNotFound, SizeExceeded
from superfluid.installer.sources.bundles import (
    BUNDLE_MAX,
    SUFFIX,
    Bundles,
    bundle_bytes,
    bundle_file,
    too_large,
    unless_absent,
)
from superfluid.installer.sources.github import check_repo, list_pages
from superfluid.installer.sources.oci.ref import parse_ref
from superfluid.installer.sources.release import Asset, Release, tagged
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.urls import path_of_file_url

__all__ = [
    "path_of_url",
    "root_of_url",
    "one_mirror",
    "url_below",
    "Mirror",
    "LISTING_NAME",
    "listing_path",
    "asset_path",
    "mirror_root_url",
    "schemes_text",
]

LISTING_NAME = "releases.json"


def listing_path(repo: str) -> str:
    """The listing's path below the mirror root: ``<owner>/<repo>/releases.json``.

    Raises:
        ValueError: ``repo`` is not ``owner/name``.
    """
    owner, name = check_repo(repo)
    return f"{owner}/{name}/{LISTING_NAME}"


def asset_path(repo: str, tag: str, name: str) -> str:
    """An asset's path below the mirror root: ``<owner>/<repo>/releases/download/<tag>/<name>``
    (unquoted; the tag and name are checked by the listing parser before they get here).

    Raises:
        ValueError: ``repo`` is not ``owner/name``.
    """
    owner, rname = check_repo(repo)
    return f"{owner}/{rname}/releases/download/{tag}/{name}"


#: the schemes of a mirror's URL (besides a directory's path, and the schemes of other sources)
MIRROR_SCHEMES = ("http", "https", "file")


def schemes_text(others: Sequence[str]) -> str:
    """``http://, https://, file:// or oci://``: every scheme a ``--mirror`` URL may have."""
    names = [f"{s}://" for s in (*MIRROR_SCHEMES, *others)]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def mirror_root_url(where: str, *, named_by: str = "--mirror", others: Sequence[str] = ("oci",)) -> str:
    """The mirror root as a URL ending in ``/``: an ``http(s)://`` or ``file://`` URL as given, a
    directory path as ``file://``. ``named_by`` is who gave it (``--mirror``, or a variable such as
    ``SUPERFLUID_MIRROR``), for the message; ``others``: the schemes other sources read
    (``choose.SCHEMES``), named when the scheme is none of them.

    Raises:
        ValueError: a URL of another scheme, or a path that is not a directory.
    """
    given = f"{named_by} {where}" if named_by.startswith("-") else f"{named_by}={where}"
    if where[:6].lower() == "oci://":  # a registry repository: installer/sources/oci/ref.py
        return parse_ref(where, named_by=named_by).root
    scheme = urlsplit(where).scheme.lower()
    if scheme in MIRROR_SCHEMES:
        if scheme == "file" and not os.path.isdir(path_of_file_url(where)):
            raise ValueError(f"{given}: no such directory")
        return where if where.endswith("/") else where + "/"
    if "://" in where:
        raise ValueError(f"{given}: not a mirror (a mirror is a directory, or a URL of {schemes_text(others)})")
    path = Path(where).expanduser()
    if not path.is_dir():
        raise ValueError(f"{given}: no such directory" + (" (it is a file)" if path.exists() else ""))
    return path.resolve().as_uri() + "/"


class Mirror:
    """A mirror's listings and asset URLs.

    Args:
        root: the mirror root URL (see ``mirror_root_url``).
        fetcher: a fetcher that speaks the root's scheme (``FileFetcher`` for ``file://``).
        cache: where conditional-request state and listing bodies are kept.
        offline: answer from the cache only (a directory mirror needs no cache to be offline).
    """

    def __init__(self, root: str, fetcher: Fetcher, cache: Cache, *, offline: bool = False) -> None:
        self.root = root if root.endswith("/") else root + "/"
        self.fetcher = fetcher
        self.cache = cache
        self.offline = offline
        #: what listing read so far was not trusted (malformed entries skipped), for the user
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        """Keep a warning about what was read (once)."""
        if message not in self.warnings:
            self.warnings.append(message)

    @property
    def is_local(self) -> bool:
        """Whether the mirror is a directory (reading it opens no connection)."""
        return self.root.startswith("file:")

    def describe(self) -> str:
        return f"mirror {self.root}"

    def listing_url(self, repo: str) -> str:
        return self.root + quote(listing_path(repo))

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        owner, rname = check_repo(repo)
        tail = f"releases/download/{quote(tag, safe='')}/{quote(name, safe='')}"
        return f"{self.root}{quote(owner)}/{quote(rname)}/{tail}"

    def releases(self, repo: str) -> list[Release]:
        """Every published release the mirror lists for ``repo`` (drafts skipped), as listed.

        Raises:
            ReleaseNotFound: the mirror has no listing for ``repo``.
            BadFile: the listing is not GitHub-shaped.
            OfflineMissing, DownloadError: as ``conditional.cached_get``.
        """
        try:
            return self.listed(repo)
        except OfflineMissing:
            if self.is_local:
                raise
            try:  # the cache may hold the listing of an API-shaped mirror instead
                return self._list(self.api_listing_url(repo), None)
            except OfflineMissing:
                pass
            raise
        except DownloadError as e:
            if e.status != 404:
                raise
            if not self.is_local:
                try:
                    return self._list(self.api_listing_url(repo), None)
                except DownloadError as api:
                    if api.status != 404:
                        raise
            raise ReleaseNotFound(repo, f"listing {listing_path(repo)}", where=self.root,
                                  advice="add the listing file to the mirror (see docs/install.md)") from e

    def listed(self, repo: str) -> list[Release]:
        """The releases the listing file ``<root>/<owner>/<repo>/releases.json`` lists, each asset at
        its path below the root (no API-shaped listing tried).

        Raises:
            DownloadError: as ``conditional.cached_get`` (``status`` 404: the root holds no listing).
            BadFile: the listing is not GitHub-shaped.
            OfflineMissing: offline, and the cache holds no listing.
        """
        return self._list(self.listing_url(repo), lambda tag, name: self.asset_url(repo, tag, name))

    def api_listing_url(self, repo: str) -> str:
        """The listing of a GitHub-shaped API server at the mirror root."""
        owner, rname = check_repo(repo)
        return f"{self.root}repos/{quote(owner)}/{quote(rname)}/releases?per_page=100"

    def _list(self, url: str, url_for: Callable[[str, str], str] | None) -> list[Release]:
        return list_pages(url, fetcher=self.fetcher, cache=self.cache, config=self.fetcher.config,
                          headers={"Accept": "application/json", "Accept-Encoding": "gzip"},
                          offline=self.offline and not self.is_local, url_for=url_for, warn=self.warn)

    def release(self, repo: str, tag: str) -> Release:
        """The published release ``tag`` from the mirror's listing.

        Raises:
            ReleaseNotFound: the listing has no published release ``tag``.
        """
        found = tagged(self.releases(repo), tag)
        if found is None:
            raise ReleaseNotFound(repo, f"release {tag}", where=self.root)
        return found

    def bundles(self, repo: str, asset: Asset, sha256: str) -> Bundles:
        """The bundle beside ``asset`` in the mirror, ``<asset>.sigstore.json`` (``bundles.Attested``):
        in a folder, a regular file in it (never a link, which may lead out of the folder, nor a FIFO);
        at a URL, fetched within ``BUNDLE_MAX`` and cached (an offline install reads it again). None
        when there is none (404, or offline with none cached).

        Raises:
            ProvenanceRefused: a link, a FIFO, larger than ``BUNDLE_MAX``.
            DownloadError: as ``conditional.cached_get``.
        """
        url = asset.url + SUFFIX
        if self.is_local:
            return bundle_file(path_of_file_url(url))
        try:
            got = unless_absent(lambda: cached_get(
                url, fetcher=self.fetcher, cache=self.cache, max_bytes=BUNDLE_MAX,
                headers={"Accept": "application/json", "Accept-Encoding": "identity"},
                offline=self.offline, what="Sigstore bundle"))
        except SizeExceeded as e:
            raise too_large(url, e.got) from None
        if got is None:
            return Bundles((), url)
        return bundle_bytes(got.body, url)


#: where a release download sits below a mirror root: ``<root>/<owner>/<repo>/releases/download/<tag>/<name>``
_DOWNLOAD = "/releases/download/"


def path_of_url(url: str) -> tuple[str, str, str] | None:
    """``(owner/repo, tag, name)`` of a release download URL (GitHub's, a mirror's, a directory's:
    ``…/<owner>/<repo>/releases/download/<tag>/<name>``), or None when it is not shaped so."""
    path = urlsplit(url).path
    i = path.rfind(_DOWNLOAD)
    if i < 0:
        return None
    head = path[:i].split("/")
    tail = path[i + len(_DOWNLOAD):].split("/")
    if len(head) < 2 or len(tail) != 2 or not all(tail):
        return None
    return f"{unquote(head[-2])}/{unquote(head[-1])}", unquote(tail[0]), unquote(tail[1])


def root_of_url(url: str) -> str | None:
    """The root a release download URL sits below (``ROOT`` of
    ``ROOT/<owner>/<repo>/releases/download/<tag>/<name>``, without a trailing ``/``), or None when it
    is not shaped so."""
    if path_of_url(url) is None:
        return None
    return url[:url.rfind(_DOWNLOAD)].rsplit("/", 2)[0]


def one_mirror(roots: Iterable[str | None], *, github_web: str) -> str | None:
    """The one root of ``roots`` (each download's ``root_of_url``), when it is not ``github_web``,
    where GitHub's downloads live: the mirror they came from; None for GitHub's downloads, several
    roots, or a URL not shaped as a release download (a None root)."""
    found = {r.rstrip("/") if r else r for r in roots}
    root = found.pop() if len(found) == 1 else None
    return None if root is None or root.rstrip("/").lower() == github_web.rstrip("/").lower() else root


def url_below(root: str, path: str) -> str:
    """The URL of ``path`` (a lock's mirror path) below a mirror root URL, quoted as
    ``Mirror.asset_url`` quotes it."""
    root = root if root.endswith("/") else root + "/"
    return root + "/".join(quote(part, safe="") for part in path.split("/"))
