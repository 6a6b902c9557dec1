"""Whole-file writes a reader sees old or new, never in part: a temp file beside it, then ``os.replace``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

__all__ = ["atomic_file", "write_atomic"]


#: an exclusive create that follows no link (``tempfile.mkstemp``'s flags; that module is not imported
#: on the command line's start path, where answers are kept)
_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def _fresh_names(name: str) -> Iterator[str]:
    """``.<name>.<random>.tmp``, a new random part each time (as ``tempfile.mkstemp`` names its files)."""
    for _ in range(100):
        yield f".{name}.{os.urandom(6).hex()}.tmp"


def _exclusive(folder: str, names: Iterable[str]) -> tuple[int, str]:
    """The first of ``names`` created exclusively in ``folder`` (mode 0600): (its fd, its path).

    Raises:
        FileExistsError: every name is taken.
    """
    error: OSError = FileExistsError(f"no free temp name in {folder}")
    for candidate in names:
        tmp = os.path.join(folder, candidate)
        try:
            return os.open(tmp, _EXCLUSIVE, 0o600), tmp
        except FileExistsError as e:
            error = e
    raise error


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
    target = os.fspath(path)
    folder, name = os.path.split(target)
    fd, tmp = _exclusive(folder or ".", [temp] if temp is not None else _fresh_names(name))
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
