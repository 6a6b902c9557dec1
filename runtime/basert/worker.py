"""``superfluid-worker-basert``: the basert runtime's worker command line.

See docs/runtimes.md, "The worker: `superfluid-worker-basert`".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from superfluid.runtime.basert.check import version_text
from superfluid.runtime.basert.locate import FLAG
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.options import flag_values
from superfluid.runtime.worker import engine_handlers, run

__all__ = ["PROG", "HANDLERS", "main"]

PROG = "superfluid-worker-basert"


def _version(argv: list[str]) -> int:
    """``version``: ``<version> (<path>)`` on stdout, exit 0; the reason on stderr, exit 1."""
    flags = flag_values(argv, (FLAG,))
    sys.stdout.write(version_text(flags.get(FLAG), read(os.environ)) + "\n")
    return 0


HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "version": _version, **engine_handlers("superfluid.runtime.basert", PROG),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    return run("basert", argv, HANDLERS)  # the adapter loaded only for a command that asks it


if __name__ == "__main__":
    sys.exit(main())
