"""``superfluid runtime versions <id>``: the versions a runtime installs, and which install here.

See docs/cli.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from superfluid.declarations import READS_HOME, run
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.release_flags import FOR_VARIABLE
from superfluid.release_flags import add_flags as add_for_flags

__all__ = ["HELP", "READS_HOME", "arguments", "runs_in", "run"]

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


def runs_in(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The command module that runs this line instead of this one (the dispatch imports it): the
    versions judged for another release (``--for``, or ``SUPERFLUID_FOR``) or planned from a release
    listing (``--mirror``, ``SUPERFLUID_MIRROR``, ``--offline``); None: the plain line, answered by
    ``run`` from what the runtime declares, without the planning and listing machinery (asked by
    hosts and scripts on every run)."""
    if getattr(args, "for_", None) or environ.get(FOR_VARIABLE):
        return "versions_planned"
    if getattr(args, "mirror", None) or environ.get("SUPERFLUID_MIRROR") or getattr(args, "offline", False):
        return "versions_planned"
    return None
