"""``superfluid runtime gc <id>``: remove a runtime's installs that nothing needs any more.

See docs/install.md, "Collecting old installs".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.installer.fleet.lockfile import locked_installs
from superfluid.installer.home.gc import Collected, collect
from superfluid.installer.home.installs import check_runtime_id
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.paths import flag_path
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import home, writable_home
from superfluid.runtime.kernel.output import print_json

__all__ = ["HELP", "arguments", "run", "DEFAULT_KEEP"]

HELP = Help(
    "remove old installs of a runtime",
    "Remove the installs beyond the newest N that are neither current, pinned, named by a --lock file, nor "
    "broken, in the order remove makes kill-safe. The installs this superfluid drives count first (an untested "
    "one only after them), then by version, then install time; each removal says why.",
    ("superfluid runtime gc basert --keep 1 --dry-run", "superfluid runtime gc llamacpp --lock superfluid.lock"),
    exits(_0="collected, or nothing to collect", _1="a lock that does not read, or a filesystem fault"),
)

#: installs ``gc`` keeps when ``--keep`` is not given: the newest, and the one before to go back to
DEFAULT_KEEP = 2


def arguments(p: Parser) -> None:
    p.add_argument("id")
    p.add_argument("--keep", metavar="N", help="keep the newest N installs (default 2), besides current and pinned")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed and change nothing")
    p.add_argument("--lock", action="append", metavar="FILE",
                   help="also keep the installs this lock names (repeatable)")
    add_json(p)


def _keep(value: str | None) -> int:
    if value is None:
        return DEFAULT_KEEP
    if not value.isascii() or not value.isdigit():
        raise UsageError(f"--keep {value!r} is not a count of installs (0, 1, 2, ...)")
    return int(value)


def _locks(runtime_id: str, paths: list[str] | None) -> dict[str, str]:
    given = [str(flag_path(os.path.abspath(os.path.expanduser(raw)), "--lock", "lock file")) for raw in paths or ()]
    return locked_installs(runtime_id, given)


def _text(done: object) -> str:
    assert isinstance(done, Collected)
    d = done.decision
    kept = ", ".join(f"{name} ({done.state(name)}: {why})" for name, why in d.keep) or "none"
    if not d.remove:
        if not d.keep:
            return f"superfluid: {done.id} is not installed: nothing to collect\n"
        return f"superfluid: {done.id}: nothing to collect; kept {kept}\n"
    verb = "would remove" if done.dry_run else "removed"
    why = dict(d.why_removed)
    removed = ", ".join(f"{name} ({done.state(name)}: {why[name]})" if name in why else name for name in d.remove)
    lines = [f"superfluid: {done.id}: {verb} {removed}", f"superfluid: {done.id}: kept {kept}"]
    if done.dry_run:
        lines.append("superfluid: nothing was changed (--dry-run)")
    return "".join(f"{line}\n" for line in lines)


def run(args: argparse.Namespace) -> int:
    """``runtime gc``.

    Raises:
        UsageError: exit 2.
        BadFile, StoreError, MutexBusy: exit 1.
    """
    registry.get(check_runtime_id(args.id))
    keep = _keep(args.keep)
    locked = _locks(args.id, args.lock)
    environ = dict(os.environ)
    where = home(environ) if args.dry_run else writable_home(home(environ))

    def waiting(holder: object) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: another install of {args.id} is running "
                             f"({holder.describe()}); waiting for it\n")  # type: ignore[attr-defined]

    done = collect(where, args.id, keep=keep, platform=host_platform(environ), dry_run=args.dry_run, locked=locked,
                   on_wait=waiting)
    if args.json:
        print_json(done.to_json())
    else:
        sys.stdout.write(_text(done))
    return 0
