"""The content-addressed download cache under ``$SUPERFLUID_HOME/cache``.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from superfluid.installer.cache.holds import hold
from superfluid.installer.files import open_lock_file
from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_bytes, read_json
from superfluid.runtime.kernel.layout import cache_dir
from superfluid.runtime.kernel.redact import redact_url
from superfluid.runtime.planning import parse_sha256

__all__ = ["Cache", "HttpEntry", "Partial", "sha256_file", "is_sha256"]

log = logging.getLogger(__name__)

#: bytes of one record of ours (an HTTP entry, a partial's validator); a larger file is not ours
_RECORD_MAX_BYTES = 64 << 10
#: a file the cache writes in place is opened with these: a link or a FIFO planted at its name is
#: never written through, nor waited on
_NO_FOLLOW = os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)


def is_sha256(value: str) -> bool:
    """Whether ``value`` is 64 lower-case hex digits."""

    return parse_sha256(value) == value


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """SHA-256 hex of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _read_record(path: Path) -> Any:
    """A JSON record of ours, or None when it is absent, not a regular file, too large or not JSON."""
    try:
        return read_json(path, max_bytes=_RECORD_MAX_BYTES)
    except (OSError, UntrustedJson):
        return None


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:

    write_atomic(path, data, mode=0o600)


def _lock_partial(lock_path: Path) -> int:
    """The partial's lock file, open and flocked exclusively (waiting for another download of it).
    A lock file a prune removed while we waited (it removes only a lock it holds, of a partial
    nobody writes) is let go, and the one now at its name taken instead.

    Raises:
        OSError: it cannot be opened, or is not a regular file.
    """
    while True:
        try:
            fd = open_lock_file(lock_path)
        except OSError:  # something planted at the lock's name: replaced by a fresh lock file
            with contextlib.suppress(OSError):
                os.unlink(lock_path)
            fd = open_lock_file(lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another download of the same file to finish (%s)", lock_path)
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(lock_path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@dataclass(kw_only=True, frozen=True, slots=True)
class HttpEntry:
    """What we last received from one URL: its validators and the digest of its body."""

    url: str
    sha256: str
    size: int
    etag: str | None = None
    last_modified: str | None = None
    link_next: str | None = None  # the next page of a paginated listing, as the server linked it
    stored_at: float = 0.0  # epoch seconds

    @classmethod
    def from_json(cls, data: Any) -> HttpEntry | None:
        """An entry from its JSON, or ``None`` if the file is not one of ours (treated as absent)."""
        if not isinstance(data, dict):
            return None
        try:
            entry = cls(
                url=str(data["url"]),
                sha256=str(data["sha256"]),
                size=int(data["size"]),
                etag=data.get("etag"),
                last_modified=data.get("last_modified"),
                link_next=data.get("link_next"),
                stored_at=float(data.get("stored_at", 0.0)),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return entry if is_sha256(entry.sha256) else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Partial:
    """An exclusive handle on one in-progress download: its bytes and where they came from.

    Obtained from ``Cache.partial(key)``, which holds the lock while it is in use.
    """

    def __init__(self, cache: Cache, key: str) -> None:
        self.cache = cache
        self.key = key
        self.path = cache.partial_dir / f"{key}.partial"
        self.meta_path = cache.partial_dir / f"{key}.json"

    def size(self) -> int:
        """Bytes already on disk (0 when there is no partial; anything but a regular file in its
        place is discarded, never followed or read)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return 0
        if not stat.S_ISREG(st.st_mode):
            self.discard()
            return 0
        return st.st_size

    def open_for_write(self, offset: int) -> BinaryIO:
        """The partial file for writing from ``offset`` (0: a new, empty file), never through a
        link or into a FIFO planted at its name.

        Raises:
            OSError: it cannot be opened, or is not a regular file.
        """
        if offset == 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o644)
        else:
            fd = os.open(self.path, os.O_RDWR | _NO_FOLLOW)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{self.path} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "r+b")

    def validator(self) -> dict[str, Any] | None:
        """The ``url``/``etag``/``last_modified``/``total`` the partial bytes came with, if recorded."""
        data = _read_record(self.meta_path)
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            return None
        types = {"etag": str, "last_modified": str, "total": int}
        if any(data.get(k) is not None and not isinstance(data.get(k), t) for k, t in types.items()):
            return None
        return data

    def set_validator(self, *, url: str, etag: str | None, last_modified: str | None, total: int | None) -> None:
        meta = {"url": redact_url(url), "etag": etag, "last_modified": last_modified, "total": total}
        _write_atomic(self.meta_path, json.dumps(meta).encode())

    def discard(self) -> None:
        """Remove the partial bytes and their record."""
        for p in (self.path, self.meta_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


class Cache:
    """The content-addressed download cache and the HTTP cache, rooted at ``root``.

    Args:
        root: the cache directory, normally ``$SUPERFLUID_HOME/cache`` (see ``for_home``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.blob_dir = self.root / "sha256"
        self.partial_dir = self.root / "partial"
        self.http_dir = self.root / "http"

    @classmethod
    def for_home(cls, home: str | os.PathLike[str]) -> Cache:
        """The cache of a ``SUPERFLUID_HOME``."""
        return cls(cache_dir(home))

    def _ensure(self) -> None:
        """Make the cache's directories (before anything is written).

        Raises:
            OSError: they cannot be made, or one (or the cache itself) is a symbolic link: the cache
                never writes through one, out of the home.
        """

        for d in (self.root, self.blob_dir, self.partial_dir, self.http_dir):
            if d.is_symlink():
                raise OSError(errno.ELOOP, "is a symbolic link; superfluid writes nothing through a link inside "
                                           "SUPERFLUID_HOME (remove it)", str(d))
        for d in (self.blob_dir, self.partial_dir, self.http_dir):
            d.mkdir(parents=True, exist_ok=True)

    # -- blobs ----------------------------------------------------------------------------------

    def blob_path(self, sha256: str) -> Path:
        """Where the blob of ``sha256`` lives (it may not exist).

        Raises:
            ValueError: ``sha256`` is not 64 lower-case hex digits.
        """
        if not is_sha256(sha256):
            raise ValueError(f"not a SHA-256 hex digest: {sha256!r}")
        return self.blob_dir / sha256

    def find_blob(self, sha256: str, *, size: int | None = None, rehash: bool = True) -> Path | None:
        """The cached blob of ``sha256`` if present and intact, else ``None``.

        A blob of the wrong size, or (with ``rehash``) of other content, is removed: the cache
        never hands out bytes it cannot vouch for. So is anything but a regular file in its place
        (a link, a FIFO, a device: never followed, read or waited on).
        """
        path = self.blob_path(sha256)
        ours = self._hold(sha256)
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            log.warning("%s is not a regular file; removing it", path)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        actual = st.st_size
        if (size is not None and actual != size) or (rehash and sha256_file(path) != sha256):
            log.warning("cached %s is damaged; removing it", path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return None
        if ours:
            with contextlib.suppress(OSError):
                os.utime(path, follow_symlinks=False)  # used now: a prune's grace counts from here
        return path

    def _hold(self, sha256: str) -> bool:
        """Hold the blob ``sha256`` for this process (``cachehold.hold``); whether the cache may be
        written (not through a link)."""

        return hold(self.root, (sha256,))

    def add_blob(self, src: Path, sha256: str) -> Path:
        """Move verified ``src`` (on the cache's filesystem) into the cache as ``sha256``."""
        self._ensure()
        dest = self.blob_path(sha256)
        self._hold(sha256)
        os.replace(src, dest)
        return dest

    def put_bytes(self, data: bytes) -> tuple[str, Path]:
        """Store ``data`` as a blob; answers its digest and path."""
        self._ensure()
        digest = hashlib.sha256(data).hexdigest()
        dest = self.blob_path(digest)
        self._hold(digest)
        if not dest.exists():
            _write_atomic(dest, data)
        return digest, dest

    def read_blob(self, sha256: str, *, max_bytes: int) -> bytes | None:
        """A small blob's bytes if present, intact and within ``max_bytes``."""
        path = self.find_blob(sha256, rehash=False)
        if path is None:
            return None
        try:
            data = read_bytes(path, max_bytes=max_bytes)
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == sha256 else None

    # -- partial downloads ----------------------------------------------------------------------

    def partial_key(self, *, sha256: str | None, url: str) -> str:
        """The expected digest when known (one partial per content), else a digest of the URL."""
        return f"sha256-{sha256}" if sha256 else f"url-{_key(redact_url(url))}"

    @contextlib.contextmanager
    def partial(self, key: str) -> Iterator[Partial]:
        """Hold the partial download ``key`` exclusively, across threads and processes."""
        self._ensure()
        lock_path = self.partial_dir / f"{key}.lock"
        fd = _lock_partial(lock_path)
        try:
            yield Partial(self, key)
        finally:
            os.close(fd)  # releases the flock

    # -- HTTP cache -----------------------------------------------------------------------------

    def _entry_path(self, url: str) -> Path:
        return self.http_dir / f"{_key(redact_url(url))}.json"  # keyed, and kept, without user:password@

    def http_entry(self, url: str) -> HttpEntry | None:
        """What was last received from ``url``, or ``None`` (absent, unreadable or not ours)."""
        entry = HttpEntry.from_json(_read_record(self._entry_path(url)))
        return entry if entry is not None and entry.url == redact_url(url) else None

    def drop_http(self, url: str) -> None:
        """Forget what ``url`` answered (its body blob may stay; blobs are shared by content)."""
        with contextlib.suppress(FileNotFoundError):
            self._entry_path(url).unlink()

    def http_body(self, entry: HttpEntry, *, max_bytes: int) -> bytes | None:
        """The cached body of ``entry``, or ``None`` if it is gone or damaged."""
        return self.read_blob(entry.sha256, max_bytes=max_bytes)

    def put_http(
        self,
        url: str,
        *,
        sha256: str,
        size: int,
        etag: str | None = None,
        last_modified: str | None = None,
        link_next: str | None = None,
    ) -> HttpEntry:
        """Record what ``url`` answered (its body already a blob of ``sha256``)."""
        self._ensure()
        entry = HttpEntry(url=redact_url(url), sha256=sha256, size=size, etag=etag, last_modified=last_modified,
                          link_next=redact_url(link_next) if link_next else None, stored_at=time.time())
        _write_atomic(self._entry_path(url), json.dumps(entry.to_json(), indent=1).encode())
        return entry

    def put_http_body(
        self,
        url: str,
        body: bytes,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        link_next: str | None = None,
    ) -> HttpEntry:
        """Store ``body`` as a blob and record it as what ``url`` answered."""
        digest, _ = self.put_bytes(body)
        return self.put_http(
            url, sha256=digest, size=len(body), etag=etag, last_modified=last_modified, link_next=link_next
        )
