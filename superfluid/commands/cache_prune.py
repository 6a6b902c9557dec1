"""``superfluid cache prune``: what no install and no kept lock needs, removed from the download cache.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.cache_report import DEFAULT_AGE, in_use_by, keep_locks, kinds_json
from superfluid.installer.cache.prune import Pruned, guard_cache, human_age, human_bytes, parse_age, prune
from superfluid.installer.home.gc import in_use
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import cache_dir, home, writable_home
from superfluid.runtime.kernel.output import print_json

__all__ = ["HELP", "arguments", "run", "DEFAULT_AGE"]

HELP = Help(
    "remove what no install and no kept lock needs",
    "Remove the archives no install (and no --keep-lock lock) needs, HTTP bodies no record names, and partial "
    "downloads nobody writes, last used longer ago than --older-than (default 30d); prints the bytes freed. "
    "What a running install holds is never removed: an install started during a prune works on.",
    ("superfluid cache prune", "superfluid cache prune --older-than 0s --dry-run --json"),
    exits(_0="pruned (or nothing to prune; with --dry-run, said what would go)",
          _1="a --keep-lock lock that does not read, a cache folder that is a link, a filesystem fault"),
)


def arguments(p: Parser) -> None:
    p.add_argument("--keep-lock", action="append", metavar="FILE",
                   help="count what this lock names as in use, and keep it (repeatable)")
    add_json(p)
    p.add_argument("--older-than", metavar="AGE",
                   help="remove only what was last used longer ago (default 30d; s, m, h, d, w: 12h, 0s)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed and change nothing")


def _prune_text(done: Pruned, older_than: str) -> str:
    verb = "would remove" if done.dry_run else "removed"
    lines = [f"{verb} {i.path} ({i.kind.replace('_', ' ')}, {human_bytes(i.size)}, last used {human_age(i.age)} ago)"
             for i in done.removed]
    files = sum(1 + len(i.also) for i in done.removed)
    needs = f"kept what is in use by {in_use_by(done.scan)}, and what running processes hold"
    if not done.removed:
        lines.append(f"superfluid: nothing in {done.scan.root} is older than {older_than} and unneeded ({needs})")
    elif done.dry_run:
        lines.append(f"superfluid: would free {human_bytes(done.freed)} ({files} files) of {done.scan.root}, older "
                     f"than {older_than} ({needs}); nothing was changed")
    else:
        lines.append(f"superfluid: freed {human_bytes(done.freed)} ({files} files) of {done.scan.root}, older than "
                     f"{older_than} ({needs})")
    return "".join(f"{line}\n" for line in lines)


def _prune(args: argparse.Namespace, root: str, home: str) -> int:
    older_than = args.older_than or DEFAULT_AGE
    try:
        grace = parse_age(older_than)
    except ValueError as e:
        raise UsageError(f"--older-than {e}") from None
    keep = keep_locks(args.keep_lock)
    guard_cache(root)
    if not args.dry_run:
        writable_home(home)

    def waiting(holder: object) -> None:
        sys.stderr.write(f"superfluid: another prune of the cache is running ({holder.describe()}); "  # type: ignore[attr-defined]
                         "waiting for it\n")

    done = prune(root, in_use(home), grace=grace, dry_run=args.dry_run, keep=keep, on_wait=waiting)
    if args.json:
        print_json({"cache": root, "dry_run": done.dry_run, "older_than": grace,
                    "removed": [i.to_json() for i in done.removed], "freed": done.freed,
                    "kinds": kinds_json(done.left()), "installs": done.scan.installs,
                    "keep_locks": list(done.scan.locks)})
    else:
        sys.stdout.write(_prune_text(done, older_than))
    return 0


def run(args: argparse.Namespace) -> int:
    """``cache prune``.

    Raises:
        UsageError: a bad flag value (exit 2).
        BadFile, StoreError, MutexBusy: exit 1.
    """
    where = home(dict(os.environ))
    return _prune(args, cache_dir(where), where)
