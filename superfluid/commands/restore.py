"""``superfluid runtime repair`` of an install whose receipt records its files: put back what differs.

See docs/install.md, "Verifying an install later".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from superfluid.installer.home.store import Installed

__all__ = ["repair", "launcher_differs"]

Reinstall = Callable[[argparse.Namespace, Mapping[str, str]], int]


def launcher_differs(target: Installed) -> bool:
    """Whether the install's worker launcher is other than the one this superfluid writes (another
    Python made it, or an older superfluid): a repair writes it anew."""
    from superfluid.installer.home.publish import launcher_script
    from superfluid.runtime.home import worker_path
    from superfluid.runtime.jsonread import read_bytes

    runtime_id = target.receipt.id if target.receipt else ""
    try:
        have = read_bytes(os.path.join(target.path, worker_path(runtime_id)), max_bytes=1 << 20)
    except OSError:
        return True
    return have != launcher_script(runtime_id).encode("utf-8")


def _mirror_root(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    from superfluid.installer.sources.mirror import mirror_root_url
    from superfluid.runtime.errors import UsageError

    named_by = "--mirror" if args.mirror else "SUPERFLUID_MIRROR"
    where = args.mirror or environ.get("SUPERFLUID_MIRROR") or None
    if where is None:
        return None
    try:
        return mirror_root_url(where, named_by=named_by)
    except ValueError as e:
        raise UsageError(str(e), fix="give --mirror an http(s):// URL or an existing directory") from None


def _target(args: argparse.Namespace, environ: Mapping[str, str]) -> Installed | None:
    """The install a repair names (or ``current`` names) when its receipt says enough to put it
    back by digest; None when the reinstall decides (and words any refusal)."""
    from superfluid.installer.home.restore import unrestorable
    from superfluid.installer.home.store import (
        check_install_name,
        current_install,
        guard_root,
        list_installs,
        runtime_root,
    )
    from superfluid.runtime.home import home

    root = runtime_root(home(environ), args.id)
    guard_root(root)  # a repair writes: nothing through a link inside the home, even when nothing differs
    name = args.install if args.install is not None else current_install(root)
    if name is None:
        return None
    check_install_name(name)
    target = next((i for i in list_installs(root) if i.name == name), None)
    if target is None or target.receipt is None or unrestorable(target.receipt) is not None:
        return None
    return target


def _nothing(args: argparse.Namespace, target: Installed, verdict: object) -> int:
    from superfluid.output import print_json

    why = f"every file of {args.id} {target.name} is as its receipt records it"
    if args.json:
        print_json({"id": args.id, "install": target.name, "repaired": False, "why": why,
                    "verified": verdict.to_json()})  # type: ignore[attr-defined]
    else:
        sys.stdout.write(f"superfluid: {why}: nothing to repair\n")
    return 0


def repair(args: argparse.Namespace, environ: Mapping[str, str], reinstall: Reinstall) -> int:
    """``runtime repair``: verify, then put back only what differs (see the module doc).

    Raises:
        UsageError: a bad install name or ``--mirror`` (exit 2).
        StoreError: the runtime's folder is a link (exit 1).
        SuperfluidError: as ``restore.restore`` (exit 1).
    """
    from superfluid.commands.install import outcome_lines
    from superfluid.installer.cache.download import progress_for
    from superfluid.installer.home.restore import plan_of, restore
    from superfluid.installer.install import Outcome
    from superfluid.output import print_json
    from superfluid.runtime.record import verify_install

    target = _target(args, environ)
    if target is None or target.receipt is None:
        return reinstall(args, environ)
    verdict = verify_install(args.id, target.name, target.path, target.receipt)
    if verdict.ok and not launcher_differs(target):
        return _nothing(args, target, verdict)
    mirror_root = _mirror_root(args, environ)
    if not args.json:
        what = "; ".join(d.describe() for d in verdict.differences) or "its worker launcher, written anew"
        sys.stderr.write(f"superfluid: putting {args.id} {target.name} back as its receipt records it: {what}\n")

    def waiting(holder: object) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: another install of {args.id} is running "
                             f"({holder.describe()}); waiting for it\n")  # type: ignore[attr-defined]

    progress = progress_for(sys.stderr, environ=environ, json_mode=args.json)
    try:
        done = restore(target.receipt, environ=environ, offline=args.offline, mirror_root=mirror_root,
                       progress=progress, on_wait=waiting)
    finally:
        progress.close()
    where = "the cache" if args.offline else "the cache, else the sources its receipt records"
    outcome = Outcome(args.id, (plan_of(target.receipt, mirror_root=mirror_root),), False, where, done.receipt,
                      str(done.path), done.replaced, done.current, done.pinned, cleaned=done.cleaned)
    if args.json:
        print_json(outcome.to_json())
    else:
        sys.stdout.write(outcome_lines(outcome, installs_before=1))
    return 0
