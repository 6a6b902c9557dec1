"""What the release tools' command lines share: a parser whose usage errors are typed."""

from __future__ import annotations

import argparse
from typing import NoReturn

from superfluid.runtime.errors import UsageError

__all__ = ["Parser"]


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` (pointing at ``--help``) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")
