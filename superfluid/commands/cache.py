"""``superfluid cache dir|du|prune``: where the download cache is, what it holds, and pruning it.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from superfluid.installer.home.gc import in_use
from superfluid.runtime.errors import UsageError

if TYPE_CHECKING:
    from superfluid.installer.cache.prune import Pruned, Scan

__all__ = ["run", "DEFAULT_AGE"]

#: ``cache prune``'s grace period when ``--older-than`` is not given
DEFAULT_AGE = "30d"

_WHAT = {
    "in_use": "archives an install needs (what `runtime repair` puts it back from), or a kept lock names",
    "unused": "archives no install needs: of removed installs, or never installed",
    "http": "HTTP bodies and records: listing pages, .sha256 files, ABI assets",
    "partial": "downloads in progress, or cut off",
    "other": "answer caches, validation stamps, the prune lock and its records",
}


def _keep(paths: Sequence[str] | None) -> dict[str, set[str]]:
    """``--keep-lock FILE``s: each lock's digests.

    Raises:
        UsageError: a file that does not exist (exit 2).
        BadFile: a lock that does not read (exit 1).
    """
    from superfluid.installer.fleet.lockfile import digests_of_locks

    given = [os.path.abspath(os.path.expanduser(p)) for p in paths or ()]
    for path, raw in zip(given, paths or (), strict=True):
        if not os.path.isfile(path):
            raise UsageError(f"--keep-lock {raw}: no such file")
    return digests_of_locks(given)


def _kinds_json(kinds: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    return {k: dict(v) for k, v in kinds.items()}


def _kinds_text(kinds: Mapping[str, Mapping[str, int]], total: Mapping[str, int]) -> str:
    from superfluid.installer.cache.prune import human_bytes
    from superfluid.output import table

    rows = [[k.replace("_", " "), human_bytes(v["bytes"]), str(v["files"]), _WHAT[k]] for k, v in kinds.items()]
    rows.append(["total", human_bytes(total["bytes"]), str(total["files"]), ""])
    return table(["KIND", "SIZE", "FILES", "WHAT"], rows)


def _needs(found: Scan) -> str:
    locks = f" and {len(found.locks)} kept lock{'s' if len(found.locks) != 1 else ''}" if found.locks else ""
    return f"{found.installs} install{'s' if found.installs != 1 else ''}{locks}"


def _du(args: argparse.Namespace, root: str, home: str) -> int:
    from superfluid.installer.cache.holds import held_now
    from superfluid.installer.cache.prune import scan
    from superfluid.output import print_json

    found = scan(root, in_use(home), keep=_keep(args.keep_lock), held=held_now(root))
    if args.json:
        print_json({"cache": root, "kinds": _kinds_json(found.by_kind()), "total": found.total(),
                    "installs": found.installs, "keep_locks": list(found.locks)})
    else:
        sys.stdout.write(_kinds_text(found.by_kind(), found.total())
                         + f"in use by {_needs(found)}; cache: {root}\n")
    return 0


def _prune_text(done: Pruned, older_than: str) -> str:
    from superfluid.installer.cache.prune import human_age, human_bytes

    verb = "would remove" if done.dry_run else "removed"
    lines = [f"{verb} {i.path} ({i.kind.replace('_', ' ')}, {human_bytes(i.size)}, last used {human_age(i.age)} ago)"
             for i in done.removed]
    files = sum(1 + len(i.also) for i in done.removed)
    needs = f"kept what is in use by {_needs(done.scan)}, and what running processes hold"
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
    from superfluid.installer.cache.prune import guard_cache, parse_age, prune
    from superfluid.output import print_json

    older_than = args.older_than or DEFAULT_AGE
    try:
        grace = parse_age(older_than)
    except ValueError as e:
        raise UsageError(f"--older-than {e}") from None
    keep = _keep(args.keep_lock)
    guard_cache(root)
    if not args.dry_run:
        from superfluid.runtime.home import writable_home

        writable_home(dict(os.environ))

    def waiting(holder: object) -> None:
        sys.stderr.write(f"superfluid: another prune of the cache is running ({holder.describe()}); "  # type: ignore[attr-defined]
                         "waiting for it\n")

    done = prune(root, in_use(home), grace=grace, dry_run=args.dry_run, keep=keep, on_wait=waiting)
    if args.json:
        print_json({"cache": root, "dry_run": done.dry_run, "older_than": grace,
                    "removed": [i.to_json() for i in done.removed], "freed": done.freed,
                    "kinds": _kinds_json(done.left()), "installs": done.scan.installs,
                    "keep_locks": list(done.scan.locks)})
    else:
        sys.stdout.write(_prune_text(done, older_than))
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch ``cache dir|du|prune``.

    Raises:
        UsageError: a bad flag value (exit 2).
        BadFile, StoreError, MutexBusy: exit 1.
    """
    from superfluid.runtime.home import cache_dir, home

    where = home(dict(os.environ))
    root = cache_dir(where)
    if args.sub == "dir":
        sys.stdout.write(root + "\n")
        return 0
    if args.sub == "du":
        return _du(args, root, where)
    if args.sub == "prune":
        return _prune(args, root, where)
    raise UsageError(f"cache {args.sub}: not a command of this module")
