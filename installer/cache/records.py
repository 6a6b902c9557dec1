"""The cache's folders and its own small files: made and written never through a link, read within a bound."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path
from typing import Any

from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_json

__all__ = ["BLOBS", "PARTIALS", "HTTP", "RECORD_MAX_BYTES", "prepare", "read_record", "write_private", "text_key"]

#: the folders of the cache's three stores, under its root
BLOBS, PARTIALS, HTTP = "sha256", "partial", "http"
#: bytes of one record of ours (an HTTP entry, a partial's validator); a larger file is not ours
RECORD_MAX_BYTES = 64 << 10


def prepare(root: Path) -> None:
    """Make the cache's folders (before any store writes).

    Raises:
        OSError: they cannot be made, or one (or the cache itself) is a symbolic link: the cache
            never writes through one, out of the home.
    """
    folders = [root / name for name in (BLOBS, PARTIALS, HTTP)]
    for d in (root, *folders):
        if d.is_symlink():
            raise OSError(errno.ELOOP, "is a symbolic link; superfluid writes nothing through a link inside "
                                       "SUPERFLUID_HOME (remove it)", str(d))
    for d in folders:
        d.mkdir(parents=True, exist_ok=True)


def read_record(path: Path) -> Any:
    """A JSON record of ours, or None when it is absent, not a regular file, too large or not JSON."""
    try:
        return read_json(path, max_bytes=RECORD_MAX_BYTES)
    except (OSError, UntrustedJson):
        return None


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` atomically, readable by the owner only."""
    write_atomic(path, data, mode=0o600)


def text_key(text: str) -> str:
    """The file name a text (a URL without credentials) is kept under: its SHA-256 hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
