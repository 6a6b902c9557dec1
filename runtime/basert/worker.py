"""``superfluid-worker-basert``: the basert runtime's worker command line (SPEC §6.5).

Commands here: ``version [--basert-lib P]`` and ``check [--model PATH] [--basert-lib P]``. Exit 0
done, 1 unusable (reason on stderr, or in the check report), 2 usage (``unknown flag --x``).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` (the adapter's
plans from the recipe's pins for this host, no network), ``install --into DIR --plan JSON`` (the
check and the probe's verdict on ``DIR/lib``, then the receipt) and ``serve --model PATH [--host H]
[--port N] [--max-context N] [--basert-lib P] [--kv-bits N]`` (``serve``: exit 3 when the model does not load,
1 when no library this build drives is found). Each prints one line on stdout; a refusal is
``superfluid-worker-basert: <why>`` on stderr. The shared pieces (plan, install, the HTTP server)
are ``runtime.install_step`` and ``runtime.serving``, as for every worker.

The shared worker layer (``superfluid.runtime.worker.run``) runs the command line with ``HANDLERS``
and answers the declarations ``compat``, ``versions`` and ``options`` from the adapter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from superfluid.runtime.basert.check import version_text
from superfluid.runtime.basert.locate import FLAG
from superfluid.runtime.options import flag_values
from superfluid.runtime.worker import engine_handlers

__all__ = ["PROG", "HANDLERS", "main"]

PROG = "superfluid-worker-basert"


def _version(argv: list[str]) -> int:
    """``version``: ``<version> (<path>)`` on stdout, exit 0; the reason on stderr, exit 1."""
    flags = flag_values(argv, (FLAG,))
    sys.stdout.write(version_text(flags.get(FLAG), os.environ) + "\n")
    return 0


HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "version": _version, **engine_handlers("superfluid.runtime.basert", PROG),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker command line; the exit code (the console script exits with it)."""
    from superfluid.runtime.basert.adapter import ADAPTER
    from superfluid.runtime.worker import run

    return run(ADAPTER, argv, HANDLERS)


if __name__ == "__main__":
    sys.exit(main())
