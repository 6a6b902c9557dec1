"""``superfluid cache du``: what the download cache holds, by kind.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from superfluid.cache_home import cache_home
from superfluid.cache_report import in_use_by, keep_locks, kinds_json
from superfluid.installer.cache.holds import held_now
from superfluid.installer.cache.prune import human_bytes, scan
from superfluid.installer.home.gc import in_use
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime.kernel.layout import cache_dir, home
from superfluid.runtime.kernel.output import print_json, table

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "what the cache holds, by kind",
    "Bytes and files of the cache by kind: archives an install (or a --keep-lock lock) needs, archives no "
    "install needs (of removed installs), HTTP bodies, partial downloads, and the rest. Changes nothing.",
    ("superfluid cache du", "superfluid cache du --json --keep-lock superfluid.lock"),
    exits(_1="a --keep-lock lock that does not read, or SUPERFLUID_HOME is not a directory"),
)

_WHAT = {
    "in_use": "archives an install needs (what `runtime repair` puts it back from), or a kept lock names",
    "unused": "archives no install needs: of removed installs, or never installed",
    "http": "HTTP bodies and records: listing pages, .sha256 files, ABI assets",
    "partial": "downloads in progress, or cut off",
    "other": "answer caches, validation stamps, the prune lock and its records",
}



def arguments(p: Parser) -> None:
    p.add_argument("--keep-lock", action="append", metavar="FILE",
                   help="count what this lock names as in use, and keep it (repeatable)")
    add_json(p)


def _kinds_text(kinds: Mapping[str, Mapping[str, int]], total: Mapping[str, int]) -> str:
    rows = [[k.replace("_", " "), human_bytes(v["bytes"]), str(v["files"]), _WHAT[k]] for k, v in kinds.items()]
    rows.append(["total", human_bytes(total["bytes"]), str(total["files"]), ""])
    return table(["KIND", "SIZE", "FILES", "WHAT"], rows)


def _du(args: argparse.Namespace, root: str, home: str) -> int:
    found = scan(root, in_use(home), keep=keep_locks(args.keep_lock), held=held_now(root))
    if args.json:
        print_json({"cache": root, "kinds": kinds_json(found.by_kind()), "total": found.total(),
                    "installs": found.installs, "keep_locks": list(found.locks)})
    else:
        sys.stdout.write(_kinds_text(found.by_kind(), found.total())
                         + f"in use by {in_use_by(found)}; cache: {root}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    """``cache du``.

    Raises:
        UsageError: a ``--keep-lock`` path that is not a readable file (exit 2).
        BadFile: a lock that does not read (exit 1).
        HomeUnusable: SUPERFLUID_HOME is a file, a dangling link or under a file (exit 1).
    """
    where = cache_home(home(dict(os.environ)))
    return _du(args, cache_dir(where), where)
