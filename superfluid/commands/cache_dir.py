"""``superfluid cache dir``: where the download cache is.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.parser import COMMON_EXITS, Help, Parser
from superfluid.runtime.kernel.layout import cache_dir, home

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "print the cache's directory",
    "Print the download cache's directory ($SUPERFLUID_HOME/cache).",
    ("superfluid cache dir",),
    ((0, "printed"), (2, COMMON_EXITS[2])),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True


def arguments(p: Parser) -> None:
    """No flags: the directory is the home's."""


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(cache_dir(home(dict(os.environ))) + "\n")
    return 0
