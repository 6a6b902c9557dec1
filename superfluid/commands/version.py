"""``superfluid version [--json]`` (and ``superfluid --version``, ``-V``): this superfluid's version."""

from __future__ import annotations

import argparse
import sys

from superfluid import __version__
from superfluid.parser import Help, Parser, add_json
from superfluid.runtime.kernel.output import print_json

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "print the version",
    "Print 'superfluid <version>' (also: superfluid --version, superfluid -V); with --json, "
    "{\"superfluid\": \"<version>\"}.",
    ("superfluid version", "superfluid version --json"),
    ((0, "printed"), (2, "a usage error")),
)


def arguments(p: Parser) -> None:
    add_json(p)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "json", False):
        print_json({"superfluid": __version__})  # schema version
    else:
        sys.stdout.write(f"superfluid {__version__}\n")
    return 0
