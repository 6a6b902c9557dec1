"""``superfluid runtime remove <id> <install>|--all``: an install removed, or every install.

See docs/install.md, "Managing installs".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from superfluid.installer.home import store
from superfluid.installer.home.hints import list_them
from superfluid.installer.home.installs import check_runtime_id
from superfluid.parser import Help, Parser, exits
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import home, writable_home
from superfluid.runtime.kernel.output import print_json

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "remove an install, or every install with --all",
    "Remove one install (a broken one too), or with --all every install of the runtime; current moves to "
    "the best-ranked install left. Without an install or --all nothing is removed (exit 2).",
    ("superfluid runtime remove basert 0.3.1-cpu", "superfluid runtime remove llamacpp --all --json"),
    exits(_0="removed", _1="no such install (or none installed), or a filesystem fault",
          _2="a usage error: no install named and no --all, or both"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id")
    p.add_argument("install", nargs="?")
    p.add_argument("--all", action="store_true", help="remove every install of the runtime")
    p.add_argument("--json", action="store_true")


def _waiting(runtime_id: str) -> Callable[[object], None]:
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
        raise UsageError(f"runtime remove {args.id} needs the install to remove, or --all for every install",
                         fix=list_them(args.id))


def _remove(args: argparse.Namespace, home: str) -> int:
    names, left = store.remove(home, args.id, args.install, on_wait=_waiting(args.id))
    if args.json:
        print_json({"id": args.id, "removed": list(names), "current": left})
        return 0
    out = f"superfluid: removed {args.id} {', '.join(names)}\n"
    if left:
        out += f"superfluid: {args.id} serves from {left} by default\n"
    sys.stdout.write(out)
    return 0


def run(args: argparse.Namespace) -> int:
    """``runtime remove``.

    Raises:
        UsageError: a bad runtime id or install name, neither an install nor ``--all``, or both (exit 2).
        NoSuchInstall, MutexBusy, StoreError: exit 1.
    """
    check_runtime_id(args.id)
    registry.get(args.id)
    _check_remove(args)
    where = writable_home(home(os.environ))  # a file, an unwritable or read-only home: named, before anything
    return _remove(args, where)
