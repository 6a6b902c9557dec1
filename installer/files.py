"""Files every layer of the installer handles one way: a lock file opened safely, a tree removed
without following links, the leftovers of a writer that died told from a live one's."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Callable

__all__ = ["NotALockFile", "open_lock_file", "remove_tree", "writer_alive"]

#: never follow a link, never block on a FIFO, never leak into a worker
_FLAGS = os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)


class NotALockFile(OSError):
    """What is at a lock file's name is a link, or anything but a regular file with one link: it is
    never opened, written or flocked through."""


def open_lock_file(path: str | os.PathLike[str], flags: int = os.O_RDWR | os.O_CREAT) -> int:
    """``path`` opened (``flags`` plus no link followed, no blocking on a FIFO, close-on-exec) for a
    ``flock``: the one rule of the install mutex, the cache's holds and the partial downloads' locks.
    The descriptor is blocking again when returned.

    Raises:
        NotALockFile: ``path`` is a symbolic link, not a regular file, or a regular file with other
            hard links (a write there would change another file); ``errno`` says which.
        OSError: it cannot be opened (permissions, a missing folder, ``O_EXCL`` and it exists).
    """
    where = os.fspath(path)
    try:
        fd = os.open(where, flags | _FLAGS, 0o644)
    except OSError as e:
        if os.path.islink(where):
            raise NotALockFile(e.errno, "is a symbolic link", where) from e
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = "has other hard links" if stat.S_ISREG(st.st_mode) else "is not a regular file"
        raise NotALockFile(0, what, where)
    os.set_blocking(fd, True)
    return fd


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Delete ``path`` (a directory tree, a file or a link; links are never followed), also where
    a directory of it lacks owner write permission. Missing is fine.

    Raises:
        OSError: it cannot be deleted.
    """
    p = os.fspath(path)

    def retry(func: Callable[..., object], target: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            func(target)
        except FileNotFoundError:
            pass

    if not os.path.lexists(p):
        return
    if os.path.isdir(p) and not os.path.islink(p):
        if sys.version_info >= (3, 12):
            shutil.rmtree(p, onexc=retry)
        else:
            shutil.rmtree(p, onerror=retry)
    else:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def writer_alive(pid: int) -> bool:
    """Whether the process ``pid`` that named a temporary file after itself may still be writing it:
    not this process (whoever asks is about to clean up, holding the lock it needs), and not a pid
    that no longer exists; a pid of another user (``PermissionError``) is taken as alive."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
