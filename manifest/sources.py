"""Where the manifest service reads releases: a directory, a mirror URL or a GitHub repository.

See docs/manifest-service.md, "Sources".
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from superfluid.installer.errors import SizeExceeded, VerificationError
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.github import check_repo
from superfluid.installer.sources.release import Release
from superfluid.installer.sources.release_source import ReleaseSource
from superfluid.installer.transport.urls import path_of_file_url
from superfluid.manifest.release_files import file_sha256
from superfluid.manifest.settings import Settings
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.jsonread import NotRegularFile, read_bytes

__all__ = ["Folder", "Snapshot", "ManifestSource", "DirectorySource", "ListingSource", "source_from",
           "DIRECTORY_TTL", "URL_TTL"]

DIRECTORY_TTL = 1.0  # seconds between looks at a directory's listing
URL_TTL = 60.0  # seconds between conditional requests for a URL source's listing


class Folder(ABC):
    """One release's files, read by name."""

    where: str  # for messages and answers: the folder's name, or the release's tag
    names: frozenset[str]

    @abstractmethod
    def read(self, name: str, *, max_bytes: int) -> bytes | None:
        """The bytes of file ``name``, or None when the folder has no such file.

        Raises:
            BadFile: it cannot be read, or holds more than ``max_bytes``.
            DownloadError: the source could not be reached (the service keeps its last answers).
        """

    @abstractmethod
    def sha256(self, name: str) -> str | None:
        """The SHA-256 of file ``name``, or None when there is none.

        Raises:
            as ``read``.
        """


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The source as it is now: a stamp that changes with it, and its release folders."""

    stamp: str
    folders: tuple[Folder, ...]


class ManifestSource(ABC):
    """A place holding releases."""

    ttl: float = DIRECTORY_TTL

    @abstractmethod
    def describe(self) -> str:
        """Where the releases come from, for messages and ``/health``."""

    @abstractmethod
    def snapshot(self) -> Snapshot:
        """The release folders as they are now.

        Raises:
            BadFile: the source cannot be listed, or its listing is broken.
            DownloadError, ReleaseNotFound: the source could not be reached, or has no such repository.
        """

    def close(self) -> None:  # noqa: B027 - optional hook: only a network source holds connections
        """Release pooled connections."""


# -- a directory of release folders ---------------------------------------------------------------


class _DirectoryFolder(Folder):
    def __init__(self, source: DirectorySource, path: Path, names: frozenset[str]) -> None:
        self.source = source
        self.path = path
        self.where = path.name
        self.names = names

    def read(self, name: str, *, max_bytes: int) -> bytes | None:
        if name not in self.names:
            return None
        where = self.path / name
        try:  # a regular file only: a FIFO or a device in a release folder is never waited on
            return read_bytes(where, max_bytes=max_bytes, follow=True)
        except FileNotFoundError:
            return None
        except NotRegularFile as e:
            raise BadFile(str(where), str(e.strerror)) from None
        except OSError as e:
            raise BadFile(str(where), f"cannot be read ({e.strerror or e})") from None

    def sha256(self, name: str) -> str | None:
        return self.source.file_sha256(self.path / name) if name in self.names else None


class DirectorySource(ManifestSource):
    """A directory of release folders (see the module doc)."""

    ttl = DIRECTORY_TTL

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256

    def describe(self) -> str:
        return f"the release folders in {self.root}"

    def _list(self, path: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(path) as it:
                return sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        except OSError as e:
            raise BadFile(str(path), f"cannot be listed ({e.strerror or e})") from None

    def snapshot(self) -> Snapshot:
        stamp = hashlib.sha256()
        folders: list[Folder] = []
        for entry in self._list(self.root):
            if not entry.is_dir():
                continue
            names = []
            for file in self._list(Path(entry.path)):
                try:
                    st = file.stat()
                except OSError:
                    continue  # removed while listed: the next look sees the folder as it is then
                names.append(file.name)
                stamp.update(f"{entry.name}/{file.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            folders.append(_DirectoryFolder(self, Path(entry.path), frozenset(names)))
        return Snapshot(stamp.hexdigest(), tuple(folders))

    def file_sha256(self, path: Path) -> str | None:
        """The SHA-256 of a file, remembered while its size and modification time stay the same.

        Raises:
            BadFile: it cannot be read.
        """
        try:
            st = path.stat()
            if not stat.S_ISREG(st.st_mode):
                raise BadFile(str(path), "is not a regular file")
            key = (str(path), st.st_size, st.st_mtime_ns)
            if key not in self._digests:
                self._digests[key] = file_sha256(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BadFile(str(path), f"cannot be read ({e.strerror or e})") from None
        return self._digests[key]


# -- a repository's releases: a mirror URL or GitHub ------------------------------------------------


class _ReleaseFolder(Folder):
    def __init__(self, source: ReleaseSource, release: Release) -> None:
        self.source = source
        self.release = release
        self.where = release.tag
        self.names = frozenset(a.name for a in release.assets)

    def read(self, name: str, *, max_bytes: int) -> bytes | None:
        asset = self.release.asset(name)
        if asset is None:
            return None
        try:
            return self.source.read(asset, max_bytes=max_bytes)
        except SizeExceeded:
            raise BadFile(asset.url, f"is larger than {max_bytes} bytes") from None

    def sha256(self, name: str) -> str | None:
        asset = self.release.asset(name)
        if asset is None:
            return None
        if asset.sha256 is not None:  # the listing's digest: no need to fetch the tarball
            return asset.sha256
        try:
            return self.source.fetch(asset, sha256=None).sha256
        except VerificationError as e:
            raise BadFile(asset.url, str(e)) from None


class ListingSource(ManifestSource):
    """The releases of ``repo`` as an installer release source lists them (GitHub or a mirror)."""

    ttl = URL_TTL

    def __init__(self, source: ReleaseSource, repo: str) -> None:
        self.source = source
        self.repo = repo

    def describe(self) -> str:
        return f"the releases of {self.repo} from {self.source.describe()}"

    def snapshot(self) -> Snapshot:
        releases = self.source.releases(self.repo)
        listing = json.dumps([r.to_json() for r in releases], sort_keys=True).encode("utf-8")
        return Snapshot(hashlib.sha256(listing).hexdigest(), tuple(_ReleaseFolder(self.source, r) for r in releases))

    def close(self) -> None:
        self.source.close()


def _mirror_parts(url: str) -> tuple[str, str]:
    """``(root, "OWNER/REPO")`` of a mirror URL ``.../ROOT/OWNER/REPO/``.

    Raises:
        UsageError: the URL's path does not end in two segments.
    """
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        raise UsageError(f"--source {url}: a mirror URL names a repository's folder, "
                         f"e.g. https://mirror.example/releases/OWNER/REPO/")
    root_path = "/" + "".join(f"{s}/" for s in segments[:-2])
    return urlunsplit((parts.scheme, parts.netloc, root_path, "", "")), "/".join(segments[-2:])


def _release_source(mirror: str | None, settings: Settings) -> ReleaseSource:
    # github: means GitHub, whatever SUPERFLUID_MIRROR says; a mirror is named in the source itself
    return source_for(replace(settings.installer, mirror=mirror))


def source_from(spec: str, settings: Settings) -> ManifestSource:
    """The source ``spec`` names: ``github:OWNER/REPO``, an ``http(s)://`` mirror URL of a
    repository's folder, or a directory (a path or a ``file://`` URL).

    ``settings.installer`` gives ``SUPERFLUID_GITHUB_API``, ``GH_TOKEN``/``GITHUB_TOKEN`` and
    ``SUPERFLUID_HOME`` (whose ``cache/`` keeps listings and assets between conditional requests).

    Raises:
        UsageError: none of these, a repository not of the form ``OWNER/REPO``, or no such directory.
    """
    if spec.startswith("github:"):
        repo = spec[len("github:"):]
        try:
            check_repo(repo)
        except ValueError as e:
            raise UsageError(f"--source {spec}: {e}") from None
        return ListingSource(_release_source(None, settings), repo)
    scheme = urlsplit(spec).scheme.lower()
    if scheme in ("http", "https"):
        root, repo = _mirror_parts(spec)
        try:
            check_repo(repo)
        except ValueError as e:
            raise UsageError(f"--source {spec}: {e}") from None
        return ListingSource(_release_source(root, settings), repo)
    path = path_of_file_url(spec) if scheme == "file" else spec
    if "://" in spec and scheme != "file":
        raise UsageError(f"--source {spec}: give a directory, an http(s):// mirror URL or github:OWNER/REPO")
    if not os.path.isdir(path):
        raise UsageError(f"--source {spec}: no such directory (give a directory of release folders, an "
                         f"http(s):// mirror URL or github:OWNER/REPO)")
    return DirectorySource(path)
