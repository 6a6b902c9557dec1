"""``superfluid-worker-llamacpp``: the llama.cpp runtime's worker command line (SPEC §6.5).

Commands here: ``version [--lib P] [--<option> V]...`` and
``check [--model PATH] [--lib P] [--<option> V]...``. Exit 0 done, 1 unusable (reason on stderr, or
in the check report), 2 usage (``unknown flag --x``).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` and
``install --into DIR --plan JSON`` (``runtime.install_step``) and ``serve --model PATH [--host H] [--port N]
[--max-context N] [--<option> V]...`` (``serve``: exit 3 when the model does not load). Each prints
one line on stdout; a refusal is ``superfluid-worker-llamacpp: <why>`` on stderr.

The shared worker layer (``superfluid.runtime.worker.run``) runs the command line with ``HANDLERS``
and answers ``compat``, ``versions`` and ``options`` from the adapter.

The native library is loaded in this process only: a crash in it kills the worker, not the command
that asked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from superfluid.runtime.llamacpp.check import parse_flags, version_text
from superfluid.runtime.worker import engine_handlers

__all__ = ["PROG", "HANDLERS", "main"]

PROG = "superfluid-worker-llamacpp"


def _version(argv: list[str]) -> int:
    """``version``: ``llama.cpp <build>`` on stdout, exit 0; the reason on stderr, exit 1."""
    _, options = parse_flags(argv, model=False)
    sys.stdout.write(version_text(options, os.environ) + "\n")
    return 0


HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "version": _version, **engine_handlers("superfluid.runtime.llamacpp", PROG),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    from superfluid.runtime.llamacpp.adapter import ADAPTER
    from superfluid.runtime.worker import run

    return run(ADAPTER, argv, HANDLERS)


if __name__ == "__main__":
    sys.exit(main())
