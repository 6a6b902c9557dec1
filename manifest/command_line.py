"""What the release tools' command lines share: a parser whose usage errors are typed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from os import PathLike
from typing import NoReturn

from superfluid.runtime.errors import UsageError

__all__ = ["Parser", "report_written"]


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` (pointing at ``--help``) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def report_written(prog: str, note: str, files: Iterable[str | PathLike[str]]) -> int:
    """A release tool's answer: ``<prog>: <note>`` on stderr, then every file it wrote on stdout, one a
    line (what the release workflow uploads). Exit code 0."""
    sys.stderr.write(f"{prog}: {note}\n")
    for path in files:
        sys.stdout.write(f"{path}\n")
    return 0
