"""``superfluid runtime remove`` and ``runtime use``: which installs a runtime keeps, and which it uses.

See docs/install.md, "Managing installs".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.runtime.errors import UsageError

__all__ = ["run"]


def _waiting(runtime_id: str):  # type: ignore[no-untyped-def]
    def on_wait(holder: object) -> None:
        sys.stderr.write(f"superfluid: another install of {runtime_id} is running "
                         f"({holder.describe()}); waiting for it\n")  # type: ignore[attr-defined]

    return on_wait


def _remove(args: argparse.Namespace, home: str) -> int:
    from superfluid.installer import store

    names, left = store.remove(home, args.id, args.install, on_wait=_waiting(args.id))
    if args.json:
        from superfluid.output import print_json

        print_json({"id": args.id, "removed": list(names), "current": left})
        return 0
    out = f"superfluid: removed {args.id} {', '.join(names)}\n"
    if left:
        out += f"superfluid: {args.id} serves from {left} by default\n"
    sys.stdout.write(out)
    return 0


def _use(args: argparse.Namespace, home: str) -> int:
    from superfluid.installer.store import pin, unpin

    if args.auto and args.install:
        raise UsageError(f"runtime use {args.id}: give an install or --auto, not both")
    if args.auto:
        chosen = unpin(home, args.id, on_wait=_waiting(args.id))
        sys.stdout.write(f"superfluid: {args.id} serves from {chosen} by default (the best-ranked)\n")
        return 0
    if not args.install:
        raise UsageError(f"runtime use {args.id} needs an install (see `superfluid runtimes`) or --auto")
    chosen = pin(home, args.id, args.install, on_wait=_waiting(args.id))
    sys.stdout.write(f"superfluid: {args.id} serves from {chosen} by default "
                     f"(pinned; `superfluid runtime use {args.id} --auto` unpins it)\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch ``runtime remove|use``.

    Raises:
        UsageError: a bad runtime id, install name or flag combination (exit 2).
        NoSuchInstall, LockBusy, StoreError: exit 1.
    """
    from superfluid.installer.store import check_runtime_id
    from superfluid.runtime import registry
    from superfluid.runtime.home import writable_home

    check_runtime_id(args.id)
    registry.get(args.id)
    where = writable_home(dict(os.environ))  # a file, an unwritable or read-only home: named, before anything
    if args.sub == "remove":
        return _remove(args, where)
    if args.sub == "use":
        return _use(args, where)
    raise UsageError(f"runtime {args.sub}: not a command of this module")
