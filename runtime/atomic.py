"""Whole-file writes a reader sees old or new, never in part: a temp file beside it, then ``os.replace``."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_file", "write_atomic"]


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], *, mode: int = 0o644, durable: bool = False,
                temp: str | None = None) -> Iterator[BinaryIO]:
    """A file to write whose bytes replace ``path`` (file mode ``mode``) when the block ends
    without error; ``durable``: flushed to disk first. ``temp`` names the temp file in the same
    directory (made exclusively: a writer whose leftovers a cleaner recognises by name); default
    a fresh ``.<name>.<random>.tmp``.

    Raises:
        OSError: the directory is not writable (the temp file is removed).
    """
    target = Path(path)
    if temp is None:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    else:
        tmp = os.path.join(target.parent, temp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644, durable: bool = False,
                 temp: str | None = None) -> None:
    """Replace ``path`` with ``data`` (as ``atomic_file``).

    Raises:
        OSError: the directory is not writable (the temp file is removed).
    """
    with atomic_file(path, mode=mode, durable=durable, temp=temp) as f:
        f.write(data)
