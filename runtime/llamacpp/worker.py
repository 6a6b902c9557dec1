"""``superfluid-worker-llamacpp``: the llama.cpp runtime's worker command line (SPEC §6.5).

Commands here: ``version [--lib P] [--<option> V]...`` and
``check [--model PATH] [--lib P] [--<option> V]...``. Exit 0 done, 1 unusable (reason on stderr, or
in the check report), 2 usage (``unknown flag --x``).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` (``plan_cli``),
``install --into DIR --plan JSON`` (``install_cli``) and ``serve --model PATH [--host H] [--port N]
[--max-context N] [--<option> V]...`` (``serve``: exit 3 when the model does not load). Each prints
one line on stdout; a refusal is ``superfluid-worker-llamacpp: <why>`` on stderr.

Dispatch: when the llamacpp adapter module and the shared worker layer are there,
``superfluid.runtime.worker.run`` runs the command line with ``HANDLERS`` (it adds ``compat``,
``versions`` and ``options``); otherwise ``_dispatch`` does the same for these two.

The native library is loaded in this process only: a crash in it kills the worker, not the command
that asked.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib.util import find_spec

from superfluid.runtime.errors import ModelLoadFailed, SuperfluidError, UsageError
from superfluid.runtime.llamacpp.check import check_argv, parse_flags, version_text

__all__ = ["PROG", "HANDLERS", "main"]

PROG = "superfluid-worker-llamacpp"


def _version(argv: list[str]) -> int:
    """``version``: ``llama.cpp <build>`` on stdout, exit 0; the reason on stderr, exit 1."""
    _, options = parse_flags(argv, model=False)
    try:
        line = version_text(options, os.environ)
    except UsageError:
        raise
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


def _plan(argv: list[str]) -> int:
    """``plan``: one line ``{"host", "describe", "plans"}``; exit 0, 1 refused, 2 a bad flag."""
    from superfluid.runtime.llamacpp.plan_cli import plan_answer

    answer = plan_answer(argv, os.environ)
    sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
    return 0


def _install(argv: list[str]) -> int:
    """``install --into DIR --plan JSON``: write DIR/runtime.json and print it on one line; exit 0, 1, 2."""
    from superfluid.runtime.llamacpp.install_cli import check_plan, install, parse_install

    into, text = parse_install(argv)
    receipt = install(into, check_plan(text), os.environ)
    sys.stdout.write(json.dumps(receipt, separators=(",", ":")) + "\n")
    return 0


def _serve(argv: list[str]) -> int:
    """``serve``: until SIGTERM/SIGINT; exit 0 clean, 1 serving failed, 2 bad line, 3 model not loaded."""
    from superfluid.runtime.llamacpp.serve import serve

    try:
        return serve(argv, os.environ, sys.stdout)
    except ModelLoadFailed as e:
        sys.stderr.write(f"{PROG}: model load failed: {e}\n")
        return 3


HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "version": _version, "check": _check, "plan": _plan, "install": _install, "serve": _serve,
}


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
    if find_spec("superfluid.runtime.llamacpp.adapter") is not None:
        from superfluid.runtime.llamacpp.adapter import ADAPTER
        from superfluid.runtime.worker import run

        return run(ADAPTER, args, HANDLERS)
    return _dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
