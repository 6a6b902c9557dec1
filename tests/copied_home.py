"""A home copied for a test, as ``runtime verify`` leaves one: every install hashed and its stat facts recorded.

A copy has new inodes and change times, which a glance calls changed (docs/cli.md, "What an install is").
"""

from __future__ import annotations

import shutil
from pathlib import Path

from superfluid.installer.home.installs import list_installs
from superfluid.runtime.kernel.layout import runtimes_dir
from superfluid.runtime.kernel.record import verify_install

__all__ = ["copy_home", "verified"]


def verified(home: Path) -> None:
    """Record the stat facts of each install of ``home`` whose every file hashes as recorded (what
    ``runtime verify`` does), so that a glance calls it what it called the original."""
    top = Path(runtimes_dir(home))
    for folder in sorted(top.iterdir()) if top.is_dir() else ():
        if folder.is_symlink() or not folder.is_dir() or folder.name.startswith("."):
            continue
        for i in list_installs(folder):
            if i.receipt is None:
                continue
            verify_install(folder.name, i.name, i.path, i.receipt, record=True)


def copy_home(source: Path, into: Path) -> None:
    """``source`` copied to ``into`` (links kept as links), its installs then ``verified``."""
    shutil.copytree(source, into, symlinks=True)
    verified(into)
