"""``superfluid-worker-basert``: the basert runtime's worker command line (SPEC §6.5).

Commands here: ``version [--basert-lib P]`` and ``check [--model PATH] [--basert-lib P]``. Exit 0
done, 1 unusable (reason on stderr, or in the check report), 2 usage (``unknown flag --x``).

The shared worker layer (``superfluid.runtime.worker.run``) runs the command line with ``HANDLERS``
and answers the declarations ``compat``, ``versions`` and ``options`` from the adapter.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from superfluid.runtime.basert.check import check_argv, parse_flags, version_text
from superfluid.runtime.basert.locate import FLAG

__all__ = ["PROG", "HANDLERS", "main", "check_report"]

PROG = "superfluid-worker-basert"


def check_report(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """The linked adapter's in-process ``check`` (``BasertAdapter.check``): the worker's report for
    the command line ``check <argv...>`` and its exit code. Same as ``check.check_argv``.

    Raises:
        UsageError: an unknown flag or a bad value.
    """
    return check_argv(argv, environ)


def _version(argv: list[str]) -> int:
    """``version``: ``<version> (<path>)`` on stdout, exit 0; the reason on stderr, exit 1."""
    flags = parse_flags(argv, (FLAG,))
    sys.stdout.write(version_text(flags.get(FLAG), os.environ) + "\n")
    return 0


def _check(argv: list[str]) -> int:
    """``check``: one line of JSON on stdout; exit 0 available (and the model read), else 1."""
    report, code = check_argv(argv, os.environ)
    sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    return code


HANDLERS: dict[str, Callable[[list[str]], int]] = {"version": _version, "check": _check}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    from superfluid.runtime.basert.adapter import ADAPTER
    from superfluid.runtime.worker import run

    return run(ADAPTER, argv, HANDLERS)


if __name__ == "__main__":
    sys.exit(main())
