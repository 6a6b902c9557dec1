"""The home whose download cache ``cache du`` and ``cache dir`` describe: one that can be a directory."""

from __future__ import annotations

import os

from superfluid.runtime.kernel.layout import HomeUnusable, home_fault, nearest_part

__all__ = ["cache_home"]


def cache_home(where: str) -> str:
    """``where``, the home whose cache ``cache du`` and ``cache dir`` describe, when it is (or can be
    made) a directory: one that is a file, a dangling link or under a file holds no cache, and saying
    "0 B" or a path beneath it would hide that (issue 42, item 29). A home not made yet is an empty one.

    Raises:
        HomeUnusable: it is not a directory and cannot be one (names SUPERFLUID_HOME and what it is).
    """
    if not os.path.isdir(nearest_part(where)):
        raise HomeUnusable(f"{home_fault(where)}: it holds no download cache",
                           advice="point SUPERFLUID_HOME at a directory (or unset it for ~/.superfluid)")
    return where
