"""``superfluid-worker-llamacpp``: the llama.cpp runtime's worker command line.

See docs/runtimes.md, "The worker".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.llamacpp.line import parse_flags, version_text
from superfluid.runtime.worker import engine_handlers, run

__all__ = ["PROG", "HANDLERS", "main"]

PROG = "superfluid-worker-llamacpp"


def _version(argv: list[str]) -> int:
    """``version``: ``llama.cpp <build>`` on stdout, exit 0; the reason on stderr, exit 1."""
    _, options = parse_flags(argv, model=False)
    sys.stdout.write(version_text(options, read(os.environ)) + "\n")
    return 0


HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "version": _version, **engine_handlers("superfluid.runtime.llamacpp", PROG),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    return run("llamacpp", argv, HANDLERS)  # the adapter loaded only for a command that asks it


if __name__ == "__main__":
    sys.exit(main())
