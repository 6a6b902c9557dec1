"""``superfluid mirror sync|verify DIR [--lock FILE]``: a static mirror of what a lock names.

See docs/fleet.md, "The mirror".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.runtime.errors import SuperfluidError, UsageError

__all__ = ["run", "MirrorMismatch"]


class MirrorMismatch(SuperfluidError):
    """``mirror verify``: a file is missing or holds other bytes than the lock pins (exit 1)."""


def _a_directory(where: str) -> None:
    """``mirror sync DIR``: DIR is a directory, or can be made one (nothing in the way).

    Raises:
        UsageError: it, or a part of its path, is something else (names which and what it is).
    """
    from superfluid.runtime.jsonread import kind_of

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
    from superfluid.installer.cache.download import progress_for
    from superfluid.installer.fleet import lockfile
    from superfluid.installer.fleet.sync import sync

    lock, digest = lockfile.read(path)
    _a_directory(args.dir)
    environ = dict(os.environ)
    progress = progress_for(sys.stderr, environ=environ)
    def tell(line: str) -> None:
        sys.stderr.write(f"superfluid: {line}\n")

    try:
        done = sync(lock, args.dir, environ=environ, progress=progress, tell=tell)
    finally:
        progress.close()
    for p in done.replaced:
        sys.stderr.write(f"superfluid: {p} held other bytes than the lock pins: replaced\n")
    sys.stdout.write(f"superfluid: {args.dir}: {len(done.fetched)} fetched, {len(done.present)} already in place "
                     f"({len(done.fetched) + len(done.present)} files of {path}, sha256 {digest[:12]}…)"
                     + (f"; wrote {', '.join(done.listings)}" if done.listings else "") + "\n")
    return 0


def _verify(args: argparse.Namespace, path: str) -> int:
    from superfluid.installer.fleet import lockfile
    from superfluid.installer.fleet.sync import verify

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
    """Dispatch ``mirror sync|verify``.

    Raises:
        UsageError: an empty directory name (exit 2).
        MirrorMismatch: ``verify`` found a problem (exit 1).
        SuperfluidError: a broken lock, a download or verification failure (exit 1).
    """
    from superfluid.commands.lock import lock_path

    if args.sub == "push":  # an OCI registry: superfluid/commands/mirror_push.py
        from superfluid.commands.mirror_push import run as push

        return push(args, lock_path(args.lock, os.environ))
    if not args.dir:
        raise UsageError("mirror needs a directory")
    path = lock_path(args.lock, os.environ)
    if args.sub == "sync":
        return _sync(args, path)
    return _verify(args, path)
