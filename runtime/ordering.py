"""Small ordering rules every adapter uses on names from its recipe (pure, no heavy imports)."""

from __future__ import annotations

import re

__all__ = ["backend_family", "digits_key"]


def backend_family(backend: str) -> str:
    """The text before the first ``-`` or ``_``: ``cuda`` of ``cuda-13.4``."""
    return re.split(r"[-_]", backend, maxsplit=1)[0]


def digits_key(version: str) -> tuple[int, ...]:
    """Every run of digits as an integer, compared in order (``0.2.6`` < ``0.3.0`` < ``0.10.0``).

    Cheap on purpose: the declarations are asked on every ``superfluid runtimes``.
    """
    return tuple(int(d) for d in re.findall(r"\d+", version))
