"""What ``cache du`` and ``cache prune`` share: the locks kept (``--keep-lock``), the kinds as JSON, and
what the cache is in use by."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.installer.cache.prune import Scan
from superfluid.installer.fleet.lockfile import digests_of_locks
from superfluid.runtime.kernel.errors import UsageError

__all__ = ["keep_locks", "kinds_json", "in_use_by"]


def keep_locks(paths: Sequence[str] | None) -> dict[str, set[str]]:
    """``--keep-lock FILE``s: each lock's digests.

    Raises:
        UsageError: a file that does not exist (exit 2).
        BadFile: a lock that does not read (exit 1).
    """
    given = [os.path.abspath(os.path.expanduser(p)) for p in paths or ()]
    for path, raw in zip(given, paths or (), strict=True):
        if not os.path.isfile(path):
            raise UsageError(f"--keep-lock {raw}: no such file")
    return digests_of_locks(given)


def kinds_json(kinds: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    return {k: dict(v) for k, v in kinds.items()}


def in_use_by(found: Scan) -> str:
    locks = f" and {len(found.locks)} kept lock{'s' if len(found.locks) != 1 else ''}" if found.locks else ""
    return f"{found.installs} install{'s' if found.installs != 1 else ''}{locks}"
