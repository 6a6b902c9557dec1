"""The partial-download store under ``$SUPERFLUID_HOME/cache/partial``: one in-progress download held at a time.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from superfluid.installer.cache.records import PARTIALS, prepare, read_record, text_key, write_private
from superfluid.installer.files import open_lock_file
from superfluid.runtime.kernel.redact import redact_url

__all__ = ["PartialStore", "Partial"]

log = logging.getLogger(__name__)

#: a file the cache writes in place is opened with these: a link or a FIFO planted at its name is
#: never written through, nor waited on
_NO_FOLLOW = os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)


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


class Partial:
    """An exclusive handle on one in-progress download: its bytes and where they came from.

    Obtained from ``PartialStore.partial(key)``, which holds the lock while it is in use.
    """

    def __init__(self, folder: Path, key: str) -> None:
        self.folder = folder
        self.key = key
        self.path = folder / f"{key}.partial"
        self.meta_path = folder / f"{key}.json"

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
        data = read_record(self.meta_path)
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            return None
        types = {"etag": str, "last_modified": str, "total": int}
        if any(data.get(k) is not None and not isinstance(data.get(k), t) for k, t in types.items()):
            return None
        return data

    def set_validator(self, *, url: str, etag: str | None, last_modified: str | None, total: int | None) -> None:
        meta = {"url": redact_url(url), "etag": etag, "last_modified": last_modified, "total": total}
        write_private(self.meta_path, json.dumps(meta).encode())

    def discard(self) -> None:
        """Remove the partial bytes and their record."""
        for p in (self.path, self.meta_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


@dataclass(frozen=True, slots=True)
class PartialStore:
    """The partial downloads of the cache rooted at ``root``, each under its key, with a lock."""

    root: Path

    @property
    def folder(self) -> Path:
        """Where the partials lie: ``<root>/partial``."""
        return self.root / PARTIALS

    def partial_key(self, *, sha256: str | None, url: str) -> str:
        """The expected digest when known (one partial per content), else a digest of the URL."""
        return f"sha256-{sha256}" if sha256 else f"url-{text_key(redact_url(url))}"

    @contextlib.contextmanager
    def partial(self, key: str) -> Iterator[Partial]:
        """Hold the partial download ``key`` exclusively, across threads and processes."""
        prepare(self.root)
        fd = _lock_partial(self.folder / f"{key}.lock")
        try:
            yield Partial(self.folder, key)
        finally:
            os.close(fd)  # releases the flock
