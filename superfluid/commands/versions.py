"""``superfluid runtime versions <id>``: the versions a runtime installs, and which install here; with
``--mirror``/``--offline`` what the release listing offers too, with ``--for`` for another release.

See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from superfluid.declarations import READS_HOME, ask, show, with_listing
from superfluid.for_release import add_flags as add_for_flags
from superfluid.for_release import release_for
from superfluid.installer.install import plan
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.home import installed_installs
from superfluid.runtime.host import detect
from superfluid.runtime.planning import NotInstallable, Request, first_published

__all__ = ["HELP", "READS_HOME", "arguments", "run"]

HELP = Help(
    "the versions a runtime installs, and which install here",
    "The versions the runtime installs on its own, newest first, judged for this machine from the recipe "
    "alone (no network): whether each installs here, as what, and whether it is installed.",
    ("superfluid runtime versions basert", "superfluid runtime versions llamacpp --json"),
    exits(_0="answered", _1="the runtime's worker failed, hung or answered something else"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id")
    add_json(p)
    add_for_flags(p)
    p.add_argument("--mirror", metavar="URL|DIR",
                   help="also say what this mirror's release listing offers here (or SUPERFLUID_MIRROR)")
    p.add_argument("--offline", action="store_true",
                   help="also say what the cached release listing offers here (no connection)")


def _listing_choice(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[dict[str, Any] | str, str] | None:
    """What ``runtime install <id> --dry-run`` would choose from the listing ``--mirror``,
    ``SUPERFLUID_MIRROR`` or ``--offline`` names: (the first plan's JSON, or why nothing installs;
    where the listing came from). None when no such listing is asked for."""
    mirror = getattr(args, "mirror", None) or environ.get("SUPERFLUID_MIRROR") or None
    offline = bool(getattr(args, "offline", False))
    if mirror is None and not offline:
        return None
    try:
        plans, where, source = plan(Request(args.id), environ=environ, mirror=mirror, offline=offline)
    except NotInstallable as e:
        return str(e), mirror or "the cache"
    if source is not None:
        source.close()
    first = first_published(plans)  # a plan refused by its needs, or not in the release, is skipped
    if first is None:
        return "; ".join(f"{p.install}: {p.refused or 'not in this release'}" for p in plans), where
    return first.to_json(), where


def run(args: argparse.Namespace) -> int:
    """``runtime versions <id>``; 0 answered, 1 the worker failed, 2 usage."""
    environ = dict(os.environ)
    for_release = release_for(args, environ)
    if for_release is not None:  # --for: the adapter's verdicts for that release's compat document
        adapter = registry.get(args.id)
        part = adapter.compat_part(Request(args.id, for_=for_release))
        answer = adapter.versions(detect(environ), installed_installs(args.id, environ), part)
    else:
        answer, _ = ask(args.id, "versions", environ)
    listing = _listing_choice(args, environ) if for_release is None else None
    if listing is not None and not isinstance(listing[0], str):
        answer = with_listing(answer, listing[0], installed_installs(args.id, environ))
    show(args, answer, listing)
    return 0
