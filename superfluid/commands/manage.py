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


def _check_remove(args: argparse.Namespace) -> None:
    """``runtime remove`` names what it removes: one install, or ``--all`` (as ``uv python uninstall --all``).

    Raises:
        UsageError: neither, or both.
    """
    if args.all and args.install:
        raise UsageError(f"runtime remove {args.id}: give an install or --all, not both")
    if not args.all and not args.install:
        raise UsageError(f"runtime remove {args.id} needs the install to remove, or --all for every install "
                         f"(`superfluid runtime list {args.id}` lists them)")


def _remove(args: argparse.Namespace, home: str) -> int:
    from superfluid.installer.home import store

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
    from superfluid.installer.home.store import pin, unpin

    if args.auto and args.install:
        raise UsageError(f"runtime use {args.id}: give an install or --auto, not both")
    if args.auto:
        chosen = unpin(home, args.id, on_wait=_waiting(args.id))
        return _used(args, chosen, None, f"superfluid: {args.id} serves from {chosen} by default (the best-ranked)")
    if not args.install:
        raise UsageError(f"runtime use {args.id} needs an install (`superfluid runtime list {args.id}` lists them) "
                         "or --auto")
    chosen = pin(home, args.id, args.install, on_wait=_waiting(args.id))
    return _used(args, chosen, chosen, f"superfluid: {args.id} serves from {chosen} by default "
                                       f"(pinned; `superfluid runtime use {args.id} --auto` unpins it)")


def _used(args: argparse.Namespace, current: str, pinned: str | None, line: str) -> int:
    """What ``use`` did: the line for people, or with ``--json`` the document (schema ``use-result``)."""
    if getattr(args, "json", False):
        from superfluid.output import print_json

        print_json({"id": args.id, "current": current, "pinned": pinned})
    else:
        sys.stdout.write(line + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch ``runtime remove|use``.

    Raises:
        UsageError: a bad runtime id, install name or flag combination (exit 2).
        NoSuchInstall, MutexBusy, StoreError: exit 1.
    """
    from superfluid.installer.home.store import check_runtime_id
    from superfluid.runtime import registry
    from superfluid.runtime.home import writable_home

    check_runtime_id(args.id)
    registry.get(args.id)
    if args.sub == "remove":
        _check_remove(args)
    where = writable_home(dict(os.environ))  # a file, an unwritable or read-only home: named, before anything
    if args.sub == "remove":
        return _remove(args, where)
    if args.sub == "use":
        return _use(args, where)
    raise UsageError(f"runtime {args.sub}: not a command of this module")
