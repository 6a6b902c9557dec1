"""What this process learned of the files it wrote, kept while each is unchanged since."""

from __future__ import annotations

import os
from typing import Generic, TypeVar

__all__ = ["Written"]

T = TypeVar("T")


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
