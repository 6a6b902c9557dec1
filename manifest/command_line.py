"""What the release tools' command lines share (``ci/pack``, ``ci/engine-assets``, ``superfluid-manifest``):
a parser whose usage errors are typed, and the mapping of errors to exit codes (2 usage, 1 the rest)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from superfluid.runtime.errors import SuperfluidError, UsageError

__all__ = ["Parser", "guarded"]


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` (pointing at ``--help``) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def guarded(prog: str, run: Callable[[], int]) -> int:
    """``run()``'s exit code; a usage error is ``prog: <message>`` and 2, any other typed error 1."""
    try:
        return run()
    except UsageError as e:
        sys.stderr.write(f"{prog}: {e}\n")
        return 2
    except SuperfluidError as e:
        sys.stderr.write(f"{prog}: {e}\n")
        return 1
