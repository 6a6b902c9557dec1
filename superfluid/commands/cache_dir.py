"""``superfluid cache dir``: where the download cache is.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.cache_home import cache_home
from superfluid.parser import COMMON_EXITS, Help, Parser
from superfluid.runtime.kernel.layout import cache_dir, home

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "print the cache's directory",
    "Print the download cache's directory ($SUPERFLUID_HOME/cache).",
    ("superfluid cache dir",),
    ((0, "printed"), (1, "SUPERFLUID_HOME is not a directory"), (2, COMMON_EXITS[2])),
)


def arguments(p: Parser) -> None:
    """No flags: the directory is the home's."""


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(cache_dir(cache_home(home(dict(os.environ)))) + "\n")
    return 0
