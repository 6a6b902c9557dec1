"""``superfluid runtime repair <id> [<install>]``: an install put back as its receipt records it.

See docs/install.md, "Verifying an install later".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from superfluid.for_release import release_for
from superfluid.install_report import outcome_lines, say
from superfluid.installer.cache.download import progress_for
from superfluid.installer.home.current import CurrentPutBack, put_current_back
from superfluid.installer.home.hints import list_them
from superfluid.installer.home.installs import (
    Installed,
    check_install_name,
    current_install,
    default_install,
    list_installs,
    runtime_root,
)
from superfluid.installer.home.launcher import launcher_script
from superfluid.installer.home.restore import plan_of, restore, unrestorable
from superfluid.installer.home.store import NoSuchInstall, guard_root
from superfluid.installer.home.upkeep import repair_target, repair_wanted
from superfluid.installer.install import Outcome
from superfluid.installer.settings import MIRROR_FLAG, Settings
from superfluid.installer.sources.choose import mirror_root
from superfluid.installer.trust.proving import keep_again
from superfluid.installing import check_id, home_holds, installed_with, recorded_mirror, request_of
from superfluid.parser import Help, Parser, exits
from superfluid.release_flags import ForFlags
from superfluid.runtime.kernel.jsonread import read_bytes
from superfluid.runtime.kernel.layout import worker_path
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.kernel.record import Verification, verify_install
from superfluid.settings import settings_of
from superfluid.source_hints import shown

# current first (put back when it names no install, no install changed); then verified: what differs is
# put back by digest; an install whose receipt does not read, or records no files, is reinstalled from
# what its receipt (or its name) says.
__all__ = ["HELP", "arguments", "run", "launcher_differs"]

HELP = Help(
    "reinstall an install in place (default: the current one)",
    "Verify an install against the files its receipt records and, only when something differs (or its "
    "worker launcher is not the one this superfluid writes), put it back exactly: its archives by their "
    "recorded digests, from the cache (verified) or fetched again, then one rename; the Sigstore bundles that "
    "proved them are kept (copied across when they are the ones recorded, else fetched again), verified again "
    "first. An install whose "
    "receipt does not read or records no files is reinstalled from what its receipt (or its name) says. "
    "First, a current that names no install (dangling, a loop, out of the runtime's folder, a file, a "
    "directory) is pointed at the default install, changing none (a file or directory there is kept aside).",
    ("superfluid runtime repair basert", "superfluid runtime repair llamacpp b11642-cpu --offline"),
    exits(_0="repaired, or nothing to repair", _1="no such install, or a run-time failure as install's"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id")
    p.add_argument("install", nargs="?")
    p.add_argument("--offline", action="store_true")
    p.add_argument("--mirror", metavar="URL|DIR")
    p.add_argument("--plain-http", action="store_true")
    p.add_argument("--json", action="store_true")


def launcher_differs(target: Installed) -> bool:
    """Whether the install's worker launcher is other than the one this superfluid writes (another
    Python made it, or an older superfluid): a repair writes it anew."""
    runtime_id = target.receipt.id if target.receipt else ""
    try:
        have = read_bytes(os.path.join(target.path, worker_path(runtime_id)), max_bytes=1 << 20)
    except OSError:
        return True
    return have != launcher_script(runtime_id).encode("utf-8")


def _mirror_root(settings: Settings) -> str | None:
    named_by, where = settings.mirror_named_by, settings.mirror
    if where is None:
        return None
    return mirror_root(where, named_by=named_by)  # a mirror that is none: refused as every source refuses it


def _target(args: argparse.Namespace, root: Path, present: Mapping[str, Installed]) -> Installed:
    """The install a repair repairs: the one named, else the one ``current`` names (put back first when
    it named none), else the default install, else the one install there is (``upkeep.repair_target``).

    Raises:
        NoSuchInstall: the install named is not there.
        NotInstallable: nothing is installed, or several broken installs and no ``current`` to choose.
    """
    if args.install is None:
        return repair_target(args.id, present, current_install(root), lambda: default_install(root))
    target = present.get(args.install)
    if target is None:
        raise NoSuchInstall(f"{args.id} has no install {args.install} (installed: {', '.join(present) or 'none'})",
                            fix=list_them(args.id))
    return target


def _unrestorable(target: Installed) -> str | None:
    """Why ``target`` is not put back by digest but reinstalled in place from what its receipt (or its
    name) says: its receipt does not read, or does not record enough (``restore.unrestorable``); None:
    it is verified, and put back only where it differs."""
    if target.receipt is None:
        return target.problem or "its receipt does not read"
    return unrestorable(target.receipt)


def _nothing(args: argparse.Namespace, target: Installed, verdict: Verification,
             current: CurrentPutBack | None) -> int:
    """Nothing of the install differs: every file hashed as recorded (a copied home's stat facts are
    recorded as they are now, so the glance calls it ready again, as ``runtime verify`` does); it is
    left as it is, whatever was done to ``current`` (``current``, said already)."""
    why = f"every file of {args.id} {target.name} is as its receipt records it" + (
        " (their stat facts recorded as they are now)" if verdict.restamped else "")
    if args.json:
        print_json({"id": args.id, "install": target.name, "repaired": False, "why": why,
                    "verified": verdict.to_json(), **_current_json(current)})
    else:
        sys.stdout.write(f"superfluid: {why}: {'left as it is' if current else 'nothing to repair'}\n")
    return 0


def _current_json(current: CurrentPutBack | None) -> dict[str, Any]:
    """``{"current_put_back": {"was", "names", "chosen", "kept"} | null}``, in every answer of a repair."""
    return {"current_put_back": current.to_json() if current is not None else None}


def run(args: argparse.Namespace) -> int:
    """``runtime repair``: ``current`` put back when it names no install, then the install verified and
    only what differs put back (see the module doc).

    Raises:
        UsageError: a bad runtime id, install name or ``--mirror`` (exit 2).
        StoreError: the runtime's folder is a link, or ``current`` cannot be put back (exit 1).
        NoSuchInstall, NotInstallable: no such install, or none to choose (exit 1).
        SuperfluidError: as ``restore.restore``, or as ``runtime install`` (exit 1).
    """
    environ = dict(os.environ)
    check_id(args.id)
    if args.install is not None:
        check_install_name(args.install)
    home_holds(environ, dry_run=False, offline=args.offline)
    settings = settings_of(environ, mirror=args.mirror, offline=args.offline, plain_http=args.plain_http,
                           json_mode=args.json)
    root = runtime_root(settings.home, args.id)
    guard_root(root)  # a repair writes: nothing through a link inside the home, even when nothing differs
    current = put_current_back(args.id, root, on_wait=lambda owner: say(  # a killed writer's leftovers first
        f"another change of {args.id} is running ({owner.describe()}); waiting for it"))
    if current is not None and not args.json:
        sys.stdout.write(f"superfluid: {current.words()}\n")
    present = {i.name: i for i in list_installs(root)}
    target = _target(args, root, present)
    why = _unrestorable(target)
    if why is not None or target.receipt is None:
        return _reinstall(args, settings, environ, target, why or "its receipt does not read",
                          before=len(present), current=current)
    verdict = verify_install(args.id, target.name, target.path, target.receipt, record=True)
    if verdict.ok and not launcher_differs(target):
        return _nothing(args, target, verdict, current)
    mirror_root = _mirror_root(settings)
    put_back = [d.path for d in verdict.differences if d.change != "added"] + (
        [] if verdict.differences else [worker_path(args.id)])
    removed = [d.path for d in verdict.differences if d.change == "added"]  # not recorded: gone with the rename
    if not args.json:
        what = "; ".join(d.describe() for d in verdict.differences) or "its worker launcher, written anew"
        sys.stderr.write(f"superfluid: putting {args.id} {target.name} back as its receipt records it: {what}\n")

    def waiting(holder: object) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: another install of {args.id} is running "
                             f"({holder.describe()}); waiting for it\n")  # type: ignore[attr-defined]

    recorded = target.receipt.extra.get("provenance")
    kept = keep_again(str(target.path), recorded, plan_of(target.receipt, mirror_root=mirror_root), settings) \
        if isinstance(recorded, Mapping) else {}  # before anything is fetched: its bundles are put back too, or nothing
    progress = progress_for(sys.stderr, mode=settings.progress)
    try:
        done = restore(target.receipt, settings, mirror_root=mirror_root,
                       progress=progress, on_wait=waiting, kept=kept)
    finally:
        progress.close()
    where = "the cache" if args.offline else "the cache, else the sources its receipt records"
    outcome = Outcome(id=args.id, plans=(plan_of(target.receipt, mirror_root=mirror_root),), dry_run=False,
                      source=where, receipt=done.receipt,
                      path=str(done.path), replaced=done.replaced, current=done.current, pinned=done.pinned,
                      cleaned=done.cleaned)
    if args.json:
        print_json({**outcome.to_json(), "repaired": True, "put_back": put_back, "removed": removed,
                    **_current_json(current)})
    else:
        sys.stdout.write(outcome_lines(outcome, installs_before=1, repaired=_repaired_words(put_back, removed)))
    return 0


def _shown(paths: list[str]) -> str:
    """``lib/a.so, lib/b.so, lib/c.so and 2 more``."""
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _repaired_words(put_back: list[str], removed: list[str]) -> str:
    """``put back lib/a.so as its receipt records it; removed lib/extra, which it does not record``: each
    path said as what the repair did to it (a file the receipt does not record is removed, not put back)."""
    said = []
    if put_back:
        said.append(f"put back {_shown(put_back)} as its receipt records {'it' if len(put_back) == 1 else 'them'}")
    if removed:
        said.append(f"removed {_shown(removed)}, which it does not record")
    return "; ".join(said)


def _reinstall(args: argparse.Namespace, settings: Settings, environ: Mapping[str, str], target: Installed,
               why: str, *, before: int, current: CurrentPutBack | None) -> int:
    """Reinstall ``target`` in place from what its receipt says (or its name, when the receipt itself
    is what is broken): ``why``, ``_unrestorable``'s answer."""
    request = request_of(args.id, for_=release_for(ForFlags(), settings, environ),
                         **repair_wanted(args.id, target.name, target.receipt, target.problem))
    recorded = _recorded_source(args.id, settings, target.name, from_=request.from_, json_mode=args.json)
    if recorded is not None:
        settings = replace(settings, mirror=recorded, mirror_named_by=MIRROR_FLAG)
    outcome = installed_with(request, settings, json_mode=args.json, dry_run=False)
    if args.json:
        print_json({**outcome.to_json(), "repaired": True, **_current_json(current)})
    else:  # said as a repair: the install of that name reinstalled in place
        sys.stdout.write(outcome_lines(outcome, installs_before=before,
                                       repaired=f"reinstalled in place from {outcome.source} (broken: {why})"))
    return 0


def _recorded_source(runtime_id: str, settings: Settings, install: str, *, from_: str | None,
                     json_mode: bool) -> str | None:
    """A repair that names no source reinstalls from the mirror the install came from, as its
    receipt records it (for a receipt that does not read: the one the runtime's other installs
    record), before GitHub; it says so. Answers that mirror, as ``--mirror`` would name it (None:
    the source named, or none recorded)."""
    if from_ or settings.mirror:
        return None
    root = recorded_mirror(runtime_id, settings, install)
    if root is None:
        return None
    mirror = shown(root)
    if not json_mode:
        say(f"reinstalling {runtime_id} {install} from the mirror {mirror}, the source the receipts of "
            f"{runtime_id} here record (--mirror names another)")
    return mirror
