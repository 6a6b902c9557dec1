"""Files of the home's cache that only save time: workers' answers, kept outputs, validation stamps."""

from __future__ import annotations

import os
import stat
from typing import Any

from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_json
from superfluid.runtime.kernel.layout import linked_between

__all__ = ["read_object", "write", "fingerprint", "changed_at"]


def read_object(path: str, *, max_bytes: int) -> dict[str, Any]:
    """The JSON object in ``path``, or {} (see the module's docstring)."""
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
