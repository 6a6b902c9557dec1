"""``superfluid runtime gc <id>``: remove a runtime's installs that nothing needs any more.

See docs/install.md, "Collecting old installs".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.runtime.errors import UsageError

__all__ = ["run", "DEFAULT_KEEP"]

#: installs ``gc`` keeps when ``--keep`` is not given: the newest, and the one before to go back to
DEFAULT_KEEP = 2


def _keep(value: str | None) -> int:
    if value is None:
        return DEFAULT_KEEP
    if not value.isascii() or not value.isdigit():
        raise UsageError(f"--keep {value!r} is not a count of installs (0, 1, 2, ...)")
    return int(value)


def _locks(runtime_id: str, paths: list[str] | None) -> dict[str, str]:
    from superfluid.installer.fleet.lockfile import locked_installs

    given = []
    for raw in paths or ():
        path = os.path.abspath(os.path.expanduser(raw))
        if not os.path.isfile(path):
            raise UsageError(f"--lock {raw}: no such file")
        given.append(path)
    return locked_installs(runtime_id, given)


def _text(done: object) -> str:
    from superfluid.installer.home.gc import Collected

    assert isinstance(done, Collected)
    d = done.decision
    kept = ", ".join(f"{name} ({why})" for name, why in d.keep) or "none"
    if not d.remove:
        if not d.keep:
            return f"superfluid: {done.id} is not installed: nothing to collect\n"
        return f"superfluid: {done.id}: nothing to collect (kept {kept})\n"
    verb = "would remove" if done.dry_run else "removed"
    lines = [f"superfluid: {done.id}: {verb} {', '.join(d.remove)}", f"superfluid: {done.id}: kept {kept}"]
    if done.dry_run:
        lines.append("superfluid: nothing was changed (--dry-run)")
    return "".join(f"{line}\n" for line in lines)


def run(args: argparse.Namespace) -> int:
    """``runtime gc``.

    Raises:
        UsageError: exit 2.
        BadFile, StoreError, MutexBusy: exit 1.
    """
    from superfluid.installer.home.gc import collect
    from superfluid.installer.home.store import check_runtime_id
    from superfluid.output import print_json
    from superfluid.runtime import registry
    from superfluid.runtime.home import home, writable_home

    registry.get(check_runtime_id(args.id))
    keep = _keep(args.keep)
    locked = _locks(args.id, args.lock)
    environ = dict(os.environ)
    where = home(environ) if args.dry_run else writable_home(environ)

    def waiting(holder: object) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: another install of {args.id} is running "
                             f"({holder.describe()}); waiting for it\n")  # type: ignore[attr-defined]

    done = collect(where, args.id, keep=keep, dry_run=args.dry_run, locked=locked, on_wait=waiting)
    if args.json:
        print_json(done.to_json())
    else:
        sys.stdout.write(_text(done))
    return 0
