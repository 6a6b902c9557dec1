"""What is kept only to save time, while the files it came from are unchanged by ``stat``: every cache's one API."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_json
from superfluid.runtime.kernel.layout import linked_between

# Every cache of superfluid is one of two kinds, both here. A cache on disk (the catalog's workers'
# answers, ``answer_cache``'s kept outputs, ``schema.validate_once``'s stamps) is a file of the home's
# cache (``read_object``, ``write``, ``stamped``) whose entries hold a ``dependency`` for each path
# they depend on, used while every one is ``unchanged``. A cache in this process (``Written``: the digests
# and ELF facts of the files an install writes) keeps a fact by the file's identity while its size and
# modification time are those it had when it was written.
__all__ = ["read_object", "write", "stamped", "fingerprint", "changed_at", "dependency", "unchanged", "settled",
           "RACY_SECONDS", "Written"]

#: a path changed this close before a computation began (or later) keeps nothing: file times are
#: coarser than the clock (a tick of the kernel), so a change during it may carry an earlier time
RACY_SECONDS = 0.2

T = TypeVar("T")


def read_object(path: str, *, max_bytes: int) -> dict[str, Any]:
    """The JSON object in ``path``, or {} (absent, unreadable, not an object: a cache only saves time)."""
    try:
        data = read_json(path, max_bytes=max_bytes)
    except (OSError, UntrustedJson):
        return {}
    return data if isinstance(data, dict) else {}


def write(home: str, path: str, data: bytes) -> bool:
    """Write ``data`` as ``path`` under ``home`` (its folders made); answers whether it was written:
    not when a part of the path below the home is a link, nor when the file system refused."""
    folder = os.path.dirname(path)
    if linked_between(home, folder) is not None:
        return False
    try:
        os.makedirs(folder, exist_ok=True)
        write_atomic(path, data)
    except OSError:
        return False
    return True


def stamped(path: str) -> bool:
    """Whether a stamp (a file whose name says what it records) is at ``path``: a regular file, not a link."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def fingerprint(path: str) -> list[Any] | None:
    """What a change to ``path`` would change: its ``lstat`` (kind, inode, size, modification and
    change times), and through a link the same of what it leads to (None there when it leads
    nowhere); None when ``path`` does not exist."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    facts: list[Any] = [st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.stat(path)
            facts += [to.st_mode, to.st_ino, to.st_size, to.st_mtime_ns, to.st_ctime_ns]
        except OSError:
            facts.append(None)
    return facts


def changed_at(facts: list[Any] | None) -> int:
    """The latest modification or change time (ns) in a ``fingerprint``; 0 for none."""
    times = [] if facts is None else facts[3:5] + facts[8:10]
    return max((t for t in times if isinstance(t, int)), default=0)


def dependency(path: str) -> list[Any]:
    """How a cache entry holds a path it depends on: ``[path, fingerprint]`` (JSON as it is)."""
    return [path, fingerprint(path)]


def unchanged(deps: Iterable[Any]) -> bool:
    """Whether every one of ``deps`` (read back from a cache file: anything) is a ``dependency`` on a
    path that is still as it was then."""
    return all(isinstance(d, list) and len(d) == 2 and isinstance(d[0], str) and dependency(d[0]) == d for d in deps)


def settled(paths: Iterable[str], began: float) -> list[list[Any]] | None:
    """The ``dependency`` of each of ``paths`` for an entry computed from ``began`` (a ``time.time()``) on,
    or None when one of them changed within ``RACY_SECONDS`` of it or later (what was read may not be
    what the entry would say). A path absent is kept absent: its appearing is a change."""
    deps = [dependency(p) for p in paths]
    if any(changed_at(facts) >= (began - RACY_SECONDS) * 1e9 for _, facts in deps):
        return None
    return deps


class Written(Generic[T]):
    """A fact of each file this process wrote (its digest, its ELF facts), kept by the file's
    (device, inode) with the size and modification time it had then: answered while both are still
    those (a rename or a chmod keeps both; a file rewritten, or a new one on a reused inode, changes
    them), so that what was learned as the file was written is not read from it again."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, int], tuple[int, int, T]] = {}

    def keep(self, st: os.stat_result, fact: T) -> None:
        """Keep ``fact`` of the file whose ``stat`` (taken after its last write) is ``st``."""
        self._kept[(st.st_dev, st.st_ino)] = (st.st_size, st.st_mtime_ns, fact)

    def get(self, st: os.stat_result) -> T | None:
        """The fact kept of the file whose ``stat`` is now ``st``, when it is unchanged since; else None."""
        kept = self._kept.get((st.st_dev, st.st_ino))
        return kept[2] if kept is not None and kept[:2] == (st.st_size, st.st_mtime_ns) else None
