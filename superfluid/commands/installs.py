"""``superfluid runtime list <id>``: every install of a runtime, current, pinned, whole or broken.

See docs/cli.md, "`superfluid runtime list <id> [--json]`".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from superfluid.installer.home.installs import (
    Installed,
    check_runtime_id,
    current_install,
    fault,
    list_installs,
    read_pinned,
    runtime_root,
)
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.kernel.fixes import repair_command
from superfluid.runtime.kernel.layout import home
from superfluid.runtime.kernel.output import print_json, table

__all__ = ["HELP", "arguments", "run", "listing", "listing_lines"]

HELP = Help(
    "the installs of a runtime: current, pinned, ready or broken",
    "List every install of a runtime under $SUPERFLUID_HOME/runtimes/<id>: its version, backend and "
    "platform, whether it is current (the default) and pinned, and whether it is ready or broken (its "
    "receipt does not read, or a file it records is missing or not as recorded), with the repair that puts a "
    "broken one back. Reads the home only: no file is hashed (runtime verify does), no worker started.",
    ("superfluid runtime list basert", "superfluid runtime list llamacpp --json"),
    exits(_0="listed (also when nothing is installed)", _1="a filesystem fault"),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True


def arguments(p: Parser) -> None:
    p.add_argument("id")
    add_json(p)


def _entry(runtime_id: str, found: Installed, current: str | None, pinned: str | None) -> dict[str, Any]:
    r = found.receipt
    why = fault(found)
    return {"install": found.name, "version": r.version if r else None, "backend": r.backend if r else None,
            "platform": r.platforms[0] if r and r.platforms else None, "tested": r.tested if r else None,
            "installed_at": r.installed_at if r else None, "current": found.name == current,
            "pinned": found.name == pinned, "state": "ready" if why is None else "broken", "problem": why,
            "fix": None if why is None else repair_command(runtime_id, found.name),
            "path": str(found.path)}


def listing(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The document of ``runtime list <id> --json`` (schema ``installs``): the installs in default
    order (the readable ones by rank, then the broken ones by name).

    Raises:
        BadName: a bad runtime id.
    """
    root = runtime_root(home(environ), runtime_id)
    current, pinned = current_install(root), read_pinned(root)
    installs = [_entry(runtime_id, i, current, pinned) for i in list_installs(root)]
    names = {i["install"] for i in installs}
    return {"id": runtime_id, "current": current if current in names else None,
            "pinned": pinned if pinned in names else None, "installs": installs}


def listing_lines(doc: dict[str, Any]) -> str:
    """The listing for people: a table, then a line for each broken install with its fix."""
    runtime_id = doc["id"]
    if not doc["installs"]:
        return (f"{runtime_id}: nothing installed (`superfluid runtime install {runtime_id}` installs it)\n")
    yes = {True: "yes", False: "no"}
    body = [[i["install"], i["version"] or "-", i["backend"] or "-", i["platform"] or "-", yes[i["current"]],
             yes[i["pinned"]], i["state"]] for i in doc["installs"]]
    text = table(["INSTALL", "VERSION", "BACKEND", "PLATFORM", "CURRENT", "PINNED", "STATE"], body)
    for i in doc["installs"]:
        if i["problem"] is not None:
            text += f"{runtime_id} {i['install']}: {i['problem']}: `{i['fix']}` puts it back\n"
    return text + f"installs of {runtime_id}: {os.path.dirname(doc['installs'][0]['path'])}\n"


def run(args: argparse.Namespace) -> int:
    """``runtime list``: print the listing.

    Raises:
        UsageError: a bad or unknown runtime id (exit 2).
    """
    registry.get(check_runtime_id(args.id))  # an unknown runtime is a usage error
    doc = listing(args.id, dict(os.environ))
    if args.json:
        print_json(doc)
    else:
        sys.stdout.write(listing_lines(doc))
    return 0
