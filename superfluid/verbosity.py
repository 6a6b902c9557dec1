"""How much a command says besides its answer: ``-q/--quiet`` and ``-v/--verbose``, read from the line
once and asked by what prints progress and notes. See docs/cli.md, "Quiet and verbose".
"""

from __future__ import annotations

__all__ = ["QUIET", "NORMAL", "VERBOSE", "level", "quiet", "verbose", "set_level", "reset"]

QUIET = -1  # the answer, warnings and errors only: no progress bar, no notes
NORMAL = 0
VERBOSE = 1  # also each request and each decision, as it is made

_LEVEL = [NORMAL]


def level() -> int:
    """``QUIET``, ``NORMAL`` or ``VERBOSE``, as the line asked."""
    return _LEVEL[0]


def quiet() -> bool:
    """The line asked ``-q``: print no progress and no notes (answers, warnings and errors still)."""
    return _LEVEL[0] <= QUIET


def verbose() -> bool:
    """The line asked ``-v``: print each request and each decision too."""
    return _LEVEL[0] >= VERBOSE


def set_level(value: int) -> None:
    """What the line asked (the command tree's ``-q``/``-v`` set it as they are parsed)."""
    _LEVEL[0] = value


def reset() -> None:
    """Back to ``NORMAL``: a new line is about to be parsed."""
    _LEVEL[0] = NORMAL
