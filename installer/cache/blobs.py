"""The content-addressed blob store under ``$SUPERFLUID_HOME/cache/sha256``, and the digest helpers.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from superfluid.installer.cache.clone import clone_file
from superfluid.installer.cache.holds import hold
from superfluid.installer.cache.records import BLOBS, prepare, write_private
from superfluid.runtime.kernel.jsonread import read_bytes
from superfluid.runtime.planning import parse_sha256

__all__ = ["BlobStore", "sha256_file", "is_sha256"]

log = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class BlobStore:
    """The blobs of the cache rooted at ``root``, each named by the SHA-256 of its bytes."""

    root: Path

    @property
    def folder(self) -> Path:
        """Where the blobs lie: ``<root>/sha256``."""
        return self.root / BLOBS

    def blob_path(self, sha256: str) -> Path:
        """Where the blob of ``sha256`` lives (it may not exist).

        Raises:
            ValueError: ``sha256`` is not 64 lower-case hex digits.
        """
        if not is_sha256(sha256):
            raise ValueError(f"not a SHA-256 hex digest: {sha256!r}")
        return self.folder / sha256

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
        """Hold the blob ``sha256`` for this process (``holds.hold``); whether the cache may be
        written (not through a link)."""

        return hold(self.root, (sha256,))

    def add_blob(self, src: Path, sha256: str) -> Path:
        """Move verified ``src`` (on the cache's filesystem) into the cache as ``sha256``."""
        prepare(self.root)
        dest = self.blob_path(sha256)
        self._hold(sha256)
        os.replace(src, dest)
        return dest

    def keep_copy(self, src: Path, sha256: str) -> Path:
        """Keep verified ``src``, left where it is (a mirror folder's archive), in the cache as ``sha256``:
        a reflink, a hard link or a copy (``clone.clone_file``) made at a temporary name, then renamed in.
        A blob already there is kept as it is.

        Raises:
            OSError: the cache cannot be written.
        """
        prepare(self.root)
        dest = self.blob_path(sha256)
        self._hold(sha256)
        if dest.exists():
            return dest
        temp = self.folder / f".{sha256}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            clone_file(src, temp)
            os.replace(temp, dest)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
            raise
        return dest

    def put_bytes(self, data: bytes) -> tuple[str, Path]:
        """Store ``data`` as a blob; answers its digest and path."""
        prepare(self.root)
        digest = hashlib.sha256(data).hexdigest()
        dest = self.blob_path(digest)
        self._hold(digest)
        if not dest.exists():
            write_private(dest, data)
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
