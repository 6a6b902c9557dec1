"""The lock file a command reads or writes: as given, else ``SUPERFLUID_LOCK``, else ``./superfluid.lock``;
the fixes that run ``mirror verify|sync`` on a mirror folder against that lock, and what their ``--json``
says of the two."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from superfluid.installer.fleet.lockfile import DEFAULT_NAME
from superfluid.paths import flag_path
from superfluid.runtime.kernel.fixes import Fix

__all__ = ["lock_path", "checked_lock", "mirror_fix", "mirror_head"]


def lock_path(given: str | None, environ: Mapping[str, str]) -> str:
    """The lock file: as given, else ``SUPERFLUID_LOCK``, else ``./superfluid.lock``."""
    return given or environ.get("SUPERFLUID_LOCK") or DEFAULT_NAME


def checked_lock(given: str | None, flag: str, environ: Mapping[str, str], *, must_exist: bool = True) -> str:
    """``lock_path``, where a lock named by ``flag`` is first checked to be a lock file (``must_exist``
    False: or nothing yet, a lock the command writes).

    Raises:
        UsageError (exit 2): the path given is missing, a directory, a FIFO, a device or unreadable;
            the message names the flag, the path and what it is.
    """
    if given:
        flag_path(given, flag, "lock file", must_exist=must_exist)
    return lock_path(given, environ)


def mirror_fix(verb: Literal["sync", "verify"], folder: str, lock: str, *, does: str) -> Fix:
    """``superfluid mirror sync|verify FOLDER [--lock LOCK]``, which ``does``: the lock named unless it
    is the default ``./superfluid.lock``."""
    named = () if lock == DEFAULT_NAME else ("--lock", lock)
    if verb == "sync":
        return Fix.superfluid("mirror", "sync", folder, *named, does=does)
    return Fix.superfluid("mirror", "verify", folder, *named, does=does)


def mirror_head(folder: str, lock: str, digest: str) -> dict[str, Any]:
    """What ``mirror sync|verify --json`` say first (schemas ``mirror-sync``, ``mirror-verify``): the
    mirror folder and the lock (its file and its SHA-256), each path absolute."""
    return {"mirror": os.path.abspath(folder), "lock": {"file": os.path.abspath(lock), "sha256": digest}}
