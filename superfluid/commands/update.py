"""``superfluid runtime update <id>``: the newest installable version installed beside the current one.

See docs/install.md, "Managing installs".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from superfluid.for_release import check_paths, release_for
from superfluid.install_report import say
from superfluid.installer.home.hints import install_it, remove_it
from superfluid.installer.home.installs import default_install, list_installs, read_pinned, runtime_root
from superfluid.installer.home.store import pin
from superfluid.installer.home.upkeep import nothing_to_update, update_wanted
from superfluid.installer.install import plan
from superfluid.installing import check_id, home_holds, installed_with, recorded_hint, request_of, show
from superfluid.parser import Help, Parser, exits
from superfluid.release_flags import add_flags as add_for_flags
from superfluid.release_flags import flags_of
from superfluid.runtime.kernel.fixes import Fix, as_json, render
from superfluid.runtime.kernel.layout import home, install_receipt
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.kernel.receipt import read_receipt
from superfluid.runtime.planning import NotInstallable
from superfluid.settings import settings_of
from superfluid.source_hints import given, with_flags

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "install the newest installable version beside the current one",
    "Install the newest installable version of the default install's backend family beside it; the old "
    "install stays (remove it with runtime remove), and a pin moves to the new one.",
    ("superfluid runtime update llamacpp", "superfluid runtime update basert --dry-run --json"),
    exits(_0="updated, planned (--dry-run), or nothing newer installs here",
          _1="not installed, or a run-time failure as install's"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id")
    for flag in ("--offline", "--untested", "--json", "--dry-run"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--mirror", metavar="URL|DIR")
    p.add_argument("--plain-http", action="store_true")
    add_for_flags(p)


def _default(runtime_id: str, environ: Mapping[str, str]) -> tuple[Path, str]:
    """The root and the default install of a runtime, or the 'not installed' refusal."""
    root = runtime_root(home(environ), runtime_id)
    current = default_install(root)
    if current is None:
        raise NotInstallable(f"{runtime_id} is not installed", fix=install_it(runtime_id))
    return root, current


def _update(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Install the newest installable build of the default install's backend family beside it;
    the old install stays (and a pin moves to the new one)."""
    root, current = _default(args.id, environ)
    old = read_receipt(install_receipt(root / current))
    settings = settings_of(environ, mirror=args.mirror, offline=args.offline, plain_http=args.plain_http,
                           json_mode=args.json)
    request = request_of(args.id, for_=release_for(flags_of(args), settings, environ), untested=args.untested,
                         **update_wanted(old))
    def reads(mirror: str, does: str) -> Fix:
        return Fix.superfluid("runtime", "update", args.id, *(["--untested"] if args.untested else []), "--mirror",
                              mirror, does=does)

    with recorded_hint(args.id, settings, reads):
        plans, _, source = plan(request, settings)
    if source is not None:
        source.close()
    installed = {i.name for i in list_installs(root) if i.ok}
    nothing = nothing_to_update(args.id, current, old, plans[0], installed)
    if nothing is not None:
        return _nothing(args, *nothing, current)
    before = len(installed)
    outcome = installed_with(request, settings, json_mode=args.json, dry_run=args.dry_run)
    if not outcome.dry_run and outcome.receipt is not None and read_pinned(root) == current:
        pin(home(environ), args.id, outcome.receipt.install)
        if not args.json:
            say(f"{args.id} serves from {outcome.receipt.install} by default (the pin moved from {current})")
    show(outcome, json_mode=args.json, before=before)
    if not args.json and not outcome.dry_run:
        say(f"{args.id} {current} stays installed: {render([remove_it(args.id, current)])}")
    return 0


def _nothing(args: argparse.Namespace, message: str, fix: Fix | None, current: str) -> int:
    """Nothing newer installs: said, with the command that installs the newest beside it when there is one
    (carrying the source flags the line gave)."""
    fixes = [with_flags(fix, given(mirror=args.mirror, offline=args.offline, plain_http=args.plain_http))] \
        if fix is not None else []
    if args.json:
        print_json({"id": args.id, "dry_run": bool(args.dry_run), "updated": False, "current": current,
                    "why": message, "plans": [], "warnings": [], **as_json(fixes)})
    else:
        sys.stdout.write(f"superfluid: {message}" + (f": {render(fixes)}" if fixes else "") + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``runtime update``.

    Raises:
        UsageError: a bad flag value or runtime id (exit 2).
        NotInstallable: the runtime is not installed (exit 1).
        SuperfluidError: any run-time failure (exit 1).
    """
    environ = dict(os.environ)
    check_id(args.id)
    flags = flags_of(args)
    check_paths(flags, (flags.value or "").strip())  # a usage error before the home is read (exit 2)
    home_holds(environ, dry_run=args.dry_run, offline=args.offline)
    return _update(args, environ)
