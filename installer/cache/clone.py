"""A file made at a new name with the bytes of another, as cheaply as its filesystem allows: a reflink,
else a hard link, else a copy."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil

# A reflink (btrfs, XFS, APFS) shares blocks until one side is written; a hard link needs the same
# filesystem. The download cache keeps a mirror folder's archive this way, so that ``runtime repair``
# finds it by its digest after the folder moved.

__all__ = ["clone_file"]

#: ioctl(2) FICLONE (linux/fs.h): make the destination share the source's blocks
FICLONE = 0x40049409


def _reflink(src: str, dest: str) -> bool:
    """Whether ``dest`` (new) now shares ``src``'s blocks; a filesystem without reflinks leaves nothing."""
    try:
        with open(src, "rb") as s, open(dest, "xb") as d:
            try:
                fcntl.ioctl(d.fileno(), FICLONE, s.fileno())
                return True
            except OSError:
                pass
    except OSError:
        pass
    with contextlib.suppress(FileNotFoundError):
        os.unlink(dest)
    return False


def clone_file(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> str:
    """Make ``dest`` (a name where nothing is) hold the bytes of ``src``: a reflink, else a hard link,
    else a copy; answers which (``"reflink"``, ``"link"``, ``"copy"``).

    Raises:
        OSError: none of them could be made (nothing is left at ``dest``).
    """
    src, dest = os.fspath(src), os.fspath(dest)
    if _reflink(src, dest):
        return "reflink"
    try:
        os.link(src, dest, follow_symlinks=True)
        return "link"
    except OSError:
        pass
    try:
        shutil.copyfile(src, dest, follow_symlinks=True)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        raise
    return "copy"
