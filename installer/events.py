"""What an install tells while it runs: one small record per kind of event, told to the caller's ``Tell``.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from superfluid.runtime.planning import Plan

__all__ = ["Trying", "FellBack", "Unchecked", "Waiting", "Warned", "Event", "Tell"]


@dataclass(frozen=True, slots=True)
class Trying:
    """The ``index``-th plan is tried; ``cached``: the names of its remote assets the download cache holds
    by digest already, which are not fetched (their URL is not asked)."""

    plan: Plan
    index: int
    cached: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FellBack:
    """The ``index``-th plan does not run here (``reason``); the next is tried."""

    plan: Plan
    index: int
    reason: str


@dataclass(frozen=True, slots=True)
class Unchecked:
    """A local file with no digest to check it against is installed; ``sha256`` is what it hashed to."""

    plan: Plan
    path: str
    sha256: str


@dataclass(frozen=True, slots=True)
class Waiting:
    """Another install of the plan's runtime holds the lock (``holder`` says who); this one waits."""

    plan: Plan
    holder: str


@dataclass(frozen=True, slots=True)
class Warned:
    """Something read was not trusted (e.g. a malformed listing entry skipped): ``reason`` says what."""

    reason: str


#: every event an install tells
Event: TypeAlias = Trying | FellBack | Unchecked | Waiting | Warned
#: the caller's listener
Tell: TypeAlias = Callable[[Event], None]
