"""The one table of exit codes: every error type's code and each code's meaning, worded once.
See docs/cli.md, "Exit codes".
"""

from __future__ import annotations

from superfluid.runtime.kernel.errors import ModelLoadFailed, NotServable, SuperfluidError, UsageError

# The same kind of fault has the same code on every command: a path given as a flag's value that is
# missing, a directory, a FIFO or not of the kind asked (``superfluid.paths.flag_path``), a value out
# of range, a runtime or backend name that does not exist: each a ``UsageError``, exit 2.

__all__ = ["EXIT_CODES", "MEANINGS", "INTERRUPTED", "exit_code"]

#: exit code -> what it means, in the words of docs/cli.md's table
MEANINGS: dict[int, str] = {
    0: "done",
    1: "a run-time failure: network, verification, install, load, a worker that failed, hung or answered garbage, "
       "a file that is broken",
    2: "a usage error: a bad flag, an unknown runtime or backend, an option value of the wrong shape or out of "
       "range, a path given as a flag's value that is missing or not of the kind asked (a directory, a FIFO, a "
       "device); refused before anything is looked up, changed, or any worker started",
    3: "(workers serving) the model did not load",
    4: "(`serve`) the runtime for the model is not installed or cannot run here",
    130: "interrupted (Ctrl-C, SIGINT)",
}

#: the code of an interrupted command
INTERRUPTED = 130

#: error type -> exit code; the first matching type wins (a ``UsageError`` is a ``SuperfluidError``)
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, 2),
    (NotServable, 4),
    (ModelLoadFailed, 3),
    (SuperfluidError, 1),
    (OSError, 1),  # a filesystem fault no typed error named (the face words it by its kind)
    (KeyboardInterrupt, INTERRUPTED),
)


def exit_code(error: BaseException) -> int:
    """The code ``error`` exits with (1 for an error type the table does not name)."""
    return next((code for cls, code in EXIT_CODES if isinstance(error, cls)), 1)
