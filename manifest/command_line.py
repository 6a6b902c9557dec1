"""What the release tools' command lines share: a parser whose usage errors are typed."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from typing import NoReturn

from superfluid.runtime.kernel.errors import UsageError

__all__ = ["ManifestParser", "report_written", "integer", "seconds", "MAX_SECONDS", "DEFAULT_MAX_AGE",
           "PROG"]

#: the program of the compat manifest service's command line
PROG = "superfluid-manifest"
#: seconds of an answer's Cache-Control max-age when none is given (--max-age, SUPERFLUID_MANIFEST_MAX_AGE)
DEFAULT_MAX_AGE = 60

#: the most seconds a limit may be (a year): a TTL or ``max-age`` longer than that is a typo, not a wish
MAX_SECONDS = 365 * 86400
_INTEGER = re.compile(r"^[+-]?[0-9]{1,20}$")


class ManifestParser(argparse.ArgumentParser):
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


def integer(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``lo`` to ``hi`` (``--port``: 0 to 65535), else a usage error
    naming the flag (``argument --port: expected an integer from 0 to 65535, not '99999'``)."""

    def parse(raw: str) -> int:
        text = raw.strip()
        if _INTEGER.match(text) is None or not lo <= int(text) <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer from {lo} to {hi}, not {raw!r}")
        return int(text)

    return parse


def seconds(raw: str) -> float:
    """An argparse ``type``: a number of seconds from 0 to ``MAX_SECONDS``, else a usage error naming the flag
    (negative, NaN, infinite and huge values included).

    Raises:
        argparse.ArgumentTypeError: not such a number.
    """
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(f"expected a number of seconds from 0 to {MAX_SECONDS} (a year), not {raw!r}")
    return value
