"""``superfluid-worker-basert``: the basert runtime's worker command line (SPEC §6.5).

Commands here: ``version [--basert-lib P]`` and ``check [--model PATH] [--basert-lib P]``. Exit 0
done, 1 unusable (reason on stderr, or in the check report), 2 usage (``unknown flag --x``).

Dispatch: when the basert adapter module exists, the shared worker layer
(``superfluid.runtime.worker.run``) runs the command line with ``HANDLERS`` (it adds the declarations
``compat``, ``versions``, ``options``); until then ``_dispatch`` does the same for these two.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.util import find_spec
from typing import Any

from superfluid.runtime.basert.check import check_argv, parse_flags, version_text
from superfluid.runtime.basert.locate import FLAG
from superfluid.runtime.errors import SuperfluidError, UsageError

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
    try:
        line = version_text(flags.get(FLAG), os.environ)
    except SuperfluidError as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        return 1
    sys.stdout.write(line + "\n")
    return 0


def _check(argv: list[str]) -> int:
    """``check``: one line of JSON on stdout; exit 0 available (and the model read), else 1."""
    report, code = check_argv(argv, os.environ)
    sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    return code


HANDLERS: dict[str, Callable[[list[str]], int]] = {"version": _version, "check": _check}


def _usage() -> str:
    return f"usage: {PROG} <{'|'.join(sorted(HANDLERS))}> [flags]"


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        (sys.stdout if args else sys.stderr).write(_usage() + "\n")
        return 0 if args else 2
    handler = HANDLERS.get(args[0])
    try:
        if handler is None:
            raise UsageError(f"unknown command {args[0]!r}; {_usage()}")
        return handler(args[1:])
    except UsageError as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        return 2
    except SuperfluidError as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if find_spec("superfluid.runtime.basert.adapter") is not None:
        from superfluid.runtime.basert.adapter import ADAPTER
        from superfluid.runtime.worker import run

        return run(ADAPTER, args, HANDLERS)
    return _dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
