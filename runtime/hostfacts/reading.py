"""How the host facts read a file: a regular file only, opened without blocking, read up to a cap; a
FIFO, a device or a link to one (``/dev/zero``) is no fact, never waited on or read without end."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from superfluid.runtime.kernel.jsonread import NotRegularFile, kind_of

__all__ = ["open_regular", "read_head"]


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> BinaryIO:
    """The regular file at ``path``, open for reading (``follow``: its links followed, as the loader
    follows a library's soname link). ``O_NONBLOCK`` keeps a FIFO from holding the open; ``fstat`` on
    the descriptor, not the name, says what was opened.

    Raises:
        NotRegularFile: a FIFO, a device, a socket or a directory (or, without ``follow``, a link).
        OSError: nothing there, or it cannot be opened.
    """
    where = os.fspath(path)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(where, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(0, f"is {kind_of(mode)}, not a regular file", where)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_head(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes of the regular file at ``path`` (a fact is in a file's head; a
    file longer than that is read no further).

    Raises:
        NotRegularFile, OSError: as ``open_regular``, or the read fails.
    """
    with open_regular(path) as f:
        return f.read(max_bytes)
