"""What the release tools' command lines share: a parser whose usage errors are typed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from os import PathLike
from typing import NoReturn

from superfluid.runtime.errors import UsageError

__all__ = ["Parser", "report_written"]


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` (pointing at ``--help``) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        """As argparse, but a flag's value is never empty (``--source ''`` is a usage error, not "no flag")."""
        parsed, rest = super().parse_known_args(args, namespace)
        for action in self._actions:
            value = getattr(parsed, action.dest, None) if action.option_strings else None
            if value == "" or (isinstance(value, list) and "" in value):
                self.error(f"argument {action.option_strings[-1]}: needs {action.metavar or action.dest.upper()}, "
                           f"not an empty string")
        return parsed, rest


def report_written(prog: str, note: str, files: Iterable[str | PathLike[str]]) -> int:
    """A release tool's answer: ``<prog>: <note>`` on stderr, then every file it wrote on stdout, one a
    line (what the release workflow uploads). Exit code 0."""
    sys.stderr.write(f"{prog}: {note}\n")
    for path in files:
        sys.stdout.write(f"{path}\n")
    return 0
