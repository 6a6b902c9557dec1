"""The lock file a command reads or writes: as given, else ``SUPERFLUID_LOCK``, else ``./superfluid.lock``."""

from __future__ import annotations

from collections.abc import Mapping

from superfluid.installer.fleet.lockfile import DEFAULT_NAME

__all__ = ["lock_path"]


def lock_path(given: str | None, environ: Mapping[str, str]) -> str:
    """The lock file: as given, else ``SUPERFLUID_LOCK``, else ``./superfluid.lock``."""
    return given or environ.get("SUPERFLUID_LOCK") or DEFAULT_NAME
