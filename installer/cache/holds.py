"""The cache's lock protocol: what a running process uses of the cache is never pruned from under it.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator

from superfluid.installer.files import open_lock_file
from superfluid.installer.mutex import MutexOwner, install_mutex

__all__ = ["PRUNE_LOCK", "HOLDS", "hold", "held_now", "pruning", "linked"]

log = logging.getLogger(__name__)

#: in ``cache/``: the lock a prune holds exclusively, a recording process shared
PRUNE_LOCK = "prune.lock"
#: in ``cache/``: one record per live process
HOLDS = "holds"
#: seconds a recording process waits for a prune to finish deleting before it gives up recording
_WAIT = 60.0
#: the most bytes of one record a prune reads (a process holds a few dozen blobs)
_RECORD_MAX = 4 << 20
#: caches one process holds records in at once (a command uses one; a test process may use many)
_MAX_RECORDS = 8


class _Record:
    """This process's record in one cache: its open file (flock held) and what it holds."""

    def __init__(self, path: str, fd: int) -> None:
        self.path, self.fd, self.pid = path, fd, os.getpid()
        self.digests: set[str] = set()


_records: dict[str, _Record] = {}


def linked(root: str | os.PathLike[str]) -> str | None:
    """The folder of the cache at ``root`` that is a symbolic link (nothing is written through one,
    out of the home), or None."""
    for path in (os.fspath(root), os.path.join(root, HOLDS)):
        if os.path.islink(path):
            return path
    return None


@contextlib.contextmanager
def _shared(root: str) -> Iterator[None]:
    """Hold ``prune.lock`` shared: no prune deletes meanwhile (one that is deleting is waited for,
    up to ``_WAIT`` seconds, after which nothing is recorded: OSError)."""
    fd = open_lock_file(os.path.join(root, PRUNE_LOCK), os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + _WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OSError(errno.EAGAIN, "a prune of the cache held it too long", root) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def _forget() -> None:
    """At exit: this process's records go (a killed process leaves them to the next prune)."""
    for root, record in list(_records.items()):
        if record.pid == os.getpid():
            _drop(root)
    _records.clear()


def _record(root: str) -> _Record:
    """This process's record in the cache at ``root``, made (and its flock taken) the first time."""
    record = _records.get(root)
    if record is not None and record.pid == os.getpid():
        return record
    folder = os.path.join(root, HOLDS)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o755)
    path = os.path.join(folder, f"{os.getpid()}-{secrets.token_hex(8)}.lock")
    fd = open_lock_file(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file: nobody else holds it
    if not _records:
        atexit.register(_forget)
    while len(_records) >= _MAX_RECORDS:  # the oldest cache this process used lets go of its record
        _drop(next(iter(_records)))
    record = _records[root] = _Record(path, fd)
    return record


def _drop(root: str) -> None:
    record = _records.pop(root)
    with contextlib.suppress(OSError):
        os.unlink(record.path)
    with contextlib.suppress(OSError):
        os.close(record.fd)


def hold(root: str | os.PathLike[str], digests: Iterable[str]) -> bool:
    """Record that this process uses the blobs ``digests`` of the cache at ``root`` until it ends,
    so that no prune removes them. Call it *before* looking a blob up or writing it. Answers
    whether the cache may be written here: False when it, or its ``holds/``, is a symbolic link
    (nothing is then written, touched or held) or cannot be written (a read-only home: then no prune
    can run there either). Never raises."""
    top = os.fspath(root)
    if linked(top) is not None:
        return False
    record = _records.get(top)
    new = [d for d in dict.fromkeys(digests) if record is None or record.pid != os.getpid() or d not in record.digests]
    if not new:
        return True
    try:
        os.makedirs(top, exist_ok=True)
        with _shared(top):
            record = _record(top)
            os.write(record.fd, "".join(f"{d}\n" for d in new).encode("ascii"))
            record.digests.update(new)
    except OSError as e:
        log.debug("the cache at %s records no hold (%s)", top, e)
        return False
    return True


def _held_by(path: str) -> set[str] | None:
    """The digests the record at ``path`` holds while its process lives; None when its flock is
    free (its process ended) or it is not a record of ours (a link, a FIFO, too large)."""
    try:
        fd = open_lock_file(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: its process lives
            data = os.pread(fd, _RECORD_MAX, 0)
            return {line for line in data.decode("ascii", "replace").split("\n") if len(line) == 64}
        return None
    finally:
        os.close(fd)


def _live(top: str, *, clean: bool) -> set[str]:
    """The digests the records of live processes hold; ``clean``: remove the others."""
    held: set[str] = set()
    folder = os.path.join(top, HOLDS)
    try:
        names = sorted(os.listdir(folder)) if not os.path.islink(folder) else []
    except (FileNotFoundError, NotADirectoryError):
        names = []
    mine = _records.get(top)
    for name in names:
        path = os.path.join(folder, name)
        if mine is not None and mine.path == path and mine.pid == os.getpid():
            held |= mine.digests
            continue
        digests = _held_by(path)
        if digests is not None:
            held |= digests
        elif clean:
            with contextlib.suppress(OSError):
                os.unlink(path)  # its process ended (or it is not ours): it holds nothing
    return held


def held_now(root: str | os.PathLike[str]) -> set[str]:
    """The digests running processes hold in the cache at ``root`` now (no lock taken, nothing
    changed: what a dry run reports against)."""
    return _live(os.fspath(root), clean=False)


@contextlib.contextmanager
def pruning(root: str | os.PathLike[str], *, timeout: float = 600.0,
            on_wait: Callable[[MutexOwner], None] | None = None) -> Iterator[set[str]]:
    """Hold the cache at ``root`` for a prune: ``prune.lock`` exclusively (no process records a
    blob meanwhile; another prune waits), answering the digests live processes hold. The records of
    processes that ended are removed first. Call it only to delete; nothing else of the cache waits.

    Raises:
        MutexBusy: another prune held it past ``timeout`` seconds.
        MutexError: the lock file cannot be opened.
    """
    top = os.fspath(root)
    with install_mutex(top, name=PRUNE_LOCK, timeout=timeout, on_wait=on_wait, command="superfluid cache prune"):
        yield _live(top, clean=True)
