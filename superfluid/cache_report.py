"""What ``cache du``, ``cache prune`` and ``doctor`` share: the grace period a prune keeps, the locks kept
(``--keep-lock``), the kinds as JSON, and what the cache is in use by."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.installer.cache.prune import Scan
from superfluid.installer.fleet.lockfile import digests_of_locks
from superfluid.paths import flag_path
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.output import counted

__all__ = ["DEFAULT_AGE", "keep_locks", "kinds_json", "in_use_by"]

#: ``cache prune``'s grace period when ``--older-than`` is not given (and what ``doctor`` counts as prunable)
DEFAULT_AGE = "30d"


def keep_locks(paths: Sequence[str] | None) -> dict[str, set[str]]:
    """``--keep-lock FILE``s: each lock's digests.

    Raises:
        UsageError: a path that is missing, a directory, a FIFO or not a readable file (exit 2), named
            for what it is (``superfluid.paths.flag_path``).
        BadFile: a file that does not read as a lock (exit 1): named as no lock, never with a fix that
            writes a lock over it (the user named it to keep what it names, not to have it rewritten).
    """
    given = [str(flag_path(os.path.expanduser(p), "--keep-lock", "lock file")) for p in paths or ()]
    try:
        return digests_of_locks([os.path.abspath(p) for p in given])
    except BadFile as e:
        why = f"it {e.fault}" if e.fault.startswith("is ") else e.fault
        raise BadFile(e.path, f"is not a lock file superfluid reads: {why}", json_path=e.json_path,
                      advice="--keep-lock names a lock that superfluid lock wrote") from None


def kinds_json(kinds: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    return {k: dict(v) for k, v in kinds.items()}


def in_use_by(found: Scan) -> str:
    locks = f" and {counted(len(found.locks), 'kept lock')}" if found.locks else ""
    return f"{counted(found.installs, 'install')}{locks}"
