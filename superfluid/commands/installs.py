"""``superfluid runtime list <id>``: every install of a runtime, current, pinned, and its verdict.

See docs/cli.md, "`superfluid runtime list <id> [--json]`".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from superfluid.installer.home.hints import install_it
from superfluid.installer.home.installs import (
    Installed,
    Verdict,
    check_runtime_id,
    current_install,
    judge_all,
    read_pinned,
    runtime_root,
)
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel import fixes
from superfluid.runtime.kernel.layout import home
from superfluid.runtime.kernel.output import print_json, table
from superfluid.runtime.kernel.receipt import provenance_of

__all__ = ["HELP", "arguments", "run", "listing", "listing_lines"]

HELP = Help(
    "the installs of a runtime: current, pinned, and what each is",
    "List every install of a runtime under $SUPERFLUID_HOME/runtimes/<id>: its version, backend and "
    "platform, whether it is current (the default) and pinned, and what it is: ready, untested (installed "
    "with --untested), changed (a file it records is not as recorded), broken (its receipt does not read, or "
    "a file it records is gone) or not for this host, with why and what fixes it. Reads the home only: no "
    "file is hashed (runtime verify does), no worker started.",
    ("superfluid runtime list basert", "superfluid runtime list llamacpp --json"),
    exits(_0="listed (also when nothing is installed)", _1="a filesystem fault"),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True


def arguments(p: Parser) -> None:
    p.add_argument("id")
    add_json(p)


def _entry(found: Installed, verdict: Verdict, current: str | None, pinned: str | None) -> dict[str, Any]:
    r = found.receipt
    return {"install": found.name, "version": r.version if r else None, "backend": r.backend if r else None,
            "platform": r.platforms[0] if r and r.platforms else None, "tested": r.tested if r else None,
            "installed_at": r.installed_at if r else None, "current": found.name == current,
            "pinned": found.name == pinned, "state": verdict.state, "problem": verdict.why,
            "fix": None, "fixes": [], "advice": verdict.advice, "path": str(found.path),
            "provenance": provenance_of(r.extra) if r else None}


def _verdicts(runtime_id: str, environ: Mapping[str, str]) -> tuple[dict[str, Any], list[Verdict]]:
    root = runtime_root(home(environ), runtime_id)
    current, pinned = current_install(root), read_pinned(root)
    judged = judge_all(root, runtime_id, serving=current, platform=host_platform(environ))
    installs = [_entry(i, v, current, pinned) for i, v in judged]
    names = {i["install"] for i in installs}
    return ({"id": runtime_id, "current": current if current in names else None,
             "pinned": pinned if pinned in names else None, "installs": installs}, [v for _, v in judged])


def listing(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The document of ``runtime list <id> --json`` (schema ``installs``): the installs in default
    order (the readable ones by rank, then the broken ones by name), each with its verdict
    (``installs.judge``: ``state``, ``problem``, and what fixes it: ``fix``, ``fixes``, ``advice``).

    Raises:
        BadName: a bad runtime id.
    """
    doc, verdicts = _verdicts(runtime_id, environ)
    for entry, verdict in zip(doc["installs"], verdicts, strict=True):
        entry.update(fixes.as_json(verdict.fixes))
    return doc


def listing_lines(doc: dict[str, Any], verdicts: list[Verdict]) -> str:
    """The listing for people: a table, then a line for each install that is not ready, with why and
    what fixes it."""
    runtime_id = doc["id"]
    if not doc["installs"]:
        return f"{runtime_id}: nothing installed: {fixes.render([install_it(runtime_id)])}\n"
    yes = {True: "yes", False: "no"}
    body = [[i["install"], i["version"] or "-", i["backend"] or "-", i["platform"] or "-", yes[i["current"]],
             yes[i["pinned"]], i["state"]] for i in doc["installs"]]
    text = table(["INSTALL", "VERSION", "BACKEND", "PLATFORM", "CURRENT", "PINNED", "STATE"], body)
    for v in verdicts:
        if not v.ready:
            tail = v.remedy()
            text += f"{runtime_id} {v.words()}" + (f": {tail}" if tail else "") + "\n"
    return text + f"installs of {runtime_id}: {os.path.dirname(doc['installs'][0]['path'])}\n"


def run(args: argparse.Namespace) -> int:
    """``runtime list``: print the listing.

    Raises:
        UsageError: a bad or unknown runtime id (exit 2).
    """
    registry.get(check_runtime_id(args.id))  # an unknown runtime is a usage error
    environ = dict(os.environ)
    if args.json:
        print_json(listing(args.id, environ))
    else:
        sys.stdout.write(listing_lines(*_verdicts(args.id, environ)))
    return 0
