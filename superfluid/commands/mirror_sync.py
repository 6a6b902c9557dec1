"""``superfluid mirror sync DIR [--lock FILE] [--json]``: every file a lock names fetched into a static mirror.

See docs/fleet.md, "The mirror".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.installer.cache.download import progress_for
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.sync import sync
from superfluid.lock_flags import checked_lock, mirror_head
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.jsonread import kind_of
from superfluid.runtime.kernel.output import counted, print_json
from superfluid.settings import settings_of

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "fetch every file a lock names into DIR",
    "Fetch every file the lock names into DIR (<owner>/<repo>/releases/download/<tag>/<name>, and each "
    "repository's releases.json), each verified against the lock; resumable, and what is already there "
    "with the right digest is not fetched again.",
    ("superfluid mirror sync ./engines --lock superfluid.lock", "superfluid mirror sync ./engines --json"),
    exits(_0="synced", _1="a broken lock, a download or a verification that failed"),
)


def arguments(p: Parser) -> None:
    p.add_argument("dir", metavar="DIR", help="the mirror's root directory")
    p.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")
    add_json(p)


def _a_directory(where: str) -> None:
    """``mirror sync DIR``: DIR is a directory, or can be made one (nothing in the way).

    Raises:
        UsageError: it, or a part of its path, is something else (names which and what it is).
    """
    probe = os.path.abspath(where)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if os.path.isdir(probe):
        return
    what = kind_of(os.stat(probe).st_mode) if os.path.exists(probe) else "a dangling link"
    at = "" if probe == os.path.abspath(where) else f" cannot be made: {probe}"
    raise UsageError(f"mirror sync {where}{at} is {what}, not a directory: name a directory (it is made when "
                     "missing)")


def _sync(args: argparse.Namespace, path: str) -> int:
    _a_directory(args.dir)  # before the lock is read: a DIR that cannot be one is named first (exit 2)
    lock, digest = lockfile.read(path)
    settings = settings_of(dict(os.environ), json_mode=args.json)
    progress = progress_for(sys.stderr, mode=settings.progress)

    def tell(line: str) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: {line}\n")

    try:
        done = sync(lock, args.dir, settings, progress=progress, tell=tell)
    finally:
        progress.close()
    if args.json:  # schema mirror-sync
        print_json({**mirror_head(args.dir, path, digest), "fetched": list(done.fetched),
                    "present": list(done.present), "replaced": list(done.replaced), "listings": list(done.listings),
                    "bundles": list(done.bundles)})
        return 0
    for p in done.replaced:
        sys.stderr.write(f"superfluid: {p} held other bytes than the lock pins: replaced\n")
    sys.stdout.write(f"superfluid: {args.dir}: {len(done.fetched)} fetched, {len(done.present)} already in place "
                     f"({len(done.fetched) + len(done.present)} files of {path}, sha256 {digest[:12]}…)"
                     + (f"; wrote {', '.join(done.listings)}" if done.listings else "")
                     + (f"; placed {counted(len(done.bundles), 'Sigstore bundle')} beside the assets they prove"
                        if done.bundles else "") + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``mirror sync``.

    Raises:
        UsageError: an empty directory name, or one that cannot be a directory, a ``--lock`` that is not a
            lock file (exit 2).
        SuperfluidError: a broken lock, a download or verification failure (exit 1).
    """
    if not args.dir:
        raise UsageError("mirror needs a directory")
    return _sync(args, checked_lock(args.lock, "--lock", os.environ))
