"""``superfluid-worker-llamacpp``: the llama.cpp runtime's worker command line (SPEC §6.5).

Commands here: ``version [--lib P] [--<option> V]...`` and
``check [--model PATH] [--lib P] [--<option> V]...``. Exit 0 done, 1 unusable (reason on stderr, or
in the check report), 2 usage (``unknown flag --x``).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` (``plan_cli``),
``install --into DIR --plan JSON`` (``install_cli``) and ``serve --model PATH [--host H] [--port N]
[--max-context N] [--<option> V]...`` (``serve``: exit 3 when the model does not load). Each prints
one line on stdout; a refusal is ``superfluid-worker-llamacpp: <why>`` on stderr.

The shared worker layer (``superfluid.runtime.worker.run``) runs the command line with ``HANDLERS``
and answers ``compat``, ``versions`` and ``options`` from the adapter.

The native library is loaded in this process only: a crash in it kills the worker, not the command
that asked.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence

from superfluid.runtime.errors import ModelLoadFailed
from superfluid.runtime.llamacpp.check import check_argv, parse_flags, version_text

__all__ = ["PROG", "HANDLERS", "main"]

PROG = "superfluid-worker-llamacpp"


def _version(argv: list[str]) -> int:
    """``version``: ``llama.cpp <build>`` on stdout, exit 0; the reason on stderr, exit 1."""
    _, options = parse_flags(argv, model=False)
    sys.stdout.write(version_text(options, os.environ) + "\n")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    from superfluid.runtime.llamacpp.adapter import ADAPTER
    from superfluid.runtime.worker import run

    return run(ADAPTER, argv, HANDLERS)


if __name__ == "__main__":
    sys.exit(main())
