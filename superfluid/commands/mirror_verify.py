"""``superfluid mirror verify DIR [--lock FILE] [--json]``: a static mirror rechecked against a lock.

See docs/fleet.md, "The mirror".
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.sync import Problem, verify
from superfluid.lock_flags import checked_lock, mirror_fix, mirror_head
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.paths import flag_path
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.output import counted, print_json
from superfluid.settings import settings_of

__all__ = ["HELP", "arguments", "run", "MirrorMismatch"]

HELP = Help(
    "recheck DIR against a lock",
    "Recheck every file the lock names in DIR against its digest, each listing, and each Sigstore bundle beside "
    "an asset (<asset>.sigstore.json): it must still prove the asset was built by the workflow the lock names "
    "(under SUPERFLUID_SIGSTORE_ROOT's trusted root, else the public Sigstore's); change nothing.",
    ("superfluid mirror verify ./engines --lock superfluid.lock", "superfluid mirror verify ./engines --json"),
    exits(_0="every file verified", _1="a file missing or with other bytes, a listing that disagrees, a bundle that "
                                       "does not prove its asset",
          _2="usage: DIR is missing or not a directory (a file, a FIFO...), the lock named is not a lock file"),
)


class MirrorMismatch(SuperfluidError):
    """``mirror verify``: a file is missing or holds other bytes than the lock pins (exit 1)."""


def arguments(p: Parser) -> None:
    p.add_argument("dir", metavar="DIR", help="the mirror's root directory")
    p.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")
    add_json(p)


def _document(folder: str, path: str, digest: str, good: int, proven: int, problems: list[Problem]) -> dict[str, Any]:
    """What ``--json`` prints (schema ``mirror-verify``)."""
    return {**mirror_head(folder, path, digest), "verified": good, "bundles": proven,
            "problems": [{"path": p.path, "fault": p.fault} for p in problems]}


def _missing(folder: str, path: str) -> UsageError:
    """A DIR where nothing is: exit 2, with the sync that makes it when the lock reads (a broken lock
    is its own error then, and its own fix)."""
    try:
        lockfile.read(path)
    except SuperfluidError:
        return UsageError(f"{folder}: no such file or directory")
    return UsageError(f"{folder}: no such file or directory (every file of {path} is missing)",
                      fix=mirror_fix("sync", folder, path, does="makes it and fetches every file"))


def _verify(args: argparse.Namespace, path: str) -> int:
    flag_path(args.dir, "", "mirror directory", must_exist=False)  # a FIFO or a file: exit 2, naming it
    if not os.path.lexists(args.dir):
        raise _missing(args.dir, path)
    lock, digest = lockfile.read(path)
    good, proven, problems = verify(lock, args.dir, settings_of(dict(os.environ), json_mode=args.json))
    if args.json and not problems:
        print_json(_document(args.dir, path, digest, good, proven, problems))
        return 0
    if not args.json:
        for p in problems:
            sys.stdout.write(f"{p.path}: {p.fault}\n")
    if problems:
        count = counted(len(problems), "problem")
        mismatch = MirrorMismatch(f"{args.dir}: {count} against {path} ({good} files verified)",
                                  fix=mirror_fix("sync", args.dir, path, does="fetches what is missing or wrong"))
        mismatch.document = _document(args.dir, path, digest, good, proven, problems)
        raise mismatch
    bundles = f"; {counted(proven, 'Sigstore bundle')} proving {'its asset' if proven == 1 else 'their assets'}" \
        if proven else ""
    sys.stdout.write(f"superfluid: {args.dir}: every file of {path} verified ({good} files{bundles})\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``mirror verify``.

    Raises:
        UsageError: an empty directory name, a DIR that is missing or not a directory, a ``--lock`` that is
            not a lock file (exit 2).
        MirrorMismatch: a file missing or with other bytes, a bundle that does not prove its asset (exit 1).
        BadFile: the Sigstore trusted root named cannot be read (exit 1).
        SuperfluidError: a broken lock (exit 1).
    """
    if not args.dir:
        raise UsageError("mirror needs a directory")
    return _verify(args, checked_lock(args.lock, "--lock", os.environ))
