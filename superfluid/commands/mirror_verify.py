"""``superfluid mirror verify DIR [--lock FILE]``: a static mirror rechecked against a lock.

See docs/fleet.md, "The mirror".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.sync import verify
from superfluid.lock_flags import lock_path
from superfluid.parser import Help, Parser, exits
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError

__all__ = ["HELP", "arguments", "run", "MirrorMismatch"]

HELP = Help(
    "recheck DIR against a lock",
    "Recheck every file the lock names in DIR against its digest, and each listing; change nothing.",
    ("superfluid mirror verify ./engines --lock superfluid.lock",),
    exits(_0="every file verified", _1="a file missing or with other bytes, a listing that disagrees"),
)


class MirrorMismatch(SuperfluidError):
    """``mirror verify``: a file is missing or holds other bytes than the lock pins (exit 1)."""


def arguments(p: Parser) -> None:
    p.add_argument("dir", metavar="DIR", help="the mirror's root directory")
    p.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")


def _verify(args: argparse.Namespace, path: str) -> int:
    lock, _ = lockfile.read(path)
    if not os.path.isdir(args.dir):
        raise MirrorMismatch(f"{args.dir}: no such directory", fix=f"`superfluid mirror sync {args.dir} --lock {path}`")
    good, problems = verify(lock, args.dir)
    for p in problems:
        sys.stdout.write(f"{p.path}: {p.fault}\n")
    if problems:
        raise MirrorMismatch(f"{args.dir}: {len(problems)} problem(s) against {path} ({good} files verified)",
                             fix=f"`superfluid mirror sync {args.dir} --lock {path}` fetches what is missing or wrong")
    sys.stdout.write(f"superfluid: {args.dir}: every file of {path} verified ({good} files)\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``mirror verify``.

    Raises:
        UsageError: an empty directory name (exit 2).
        MirrorMismatch: a file missing or with other bytes (exit 1).
        SuperfluidError: a broken lock (exit 1).
    """
    if not args.dir:
        raise UsageError("mirror needs a directory")
    return _verify(args, lock_path(args.lock, os.environ))
