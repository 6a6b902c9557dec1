"""A hint is a value: ``Fix``, the command that fixes a fault and what it does, and the one module that
renders it (docs/cli.md, "Hints")."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Every error, refusal and warning that suggests a next step carries ``Fix`` values, never a command
# written into prose. Text renders one as the command (quoted for a shell) and its effect; ``--json`` as
# ``fix`` (the first command, a string a shell runs) and ``fixes`` (each as ``argv`` and ``does``).
# Advice that is not a command ("check the network") is prose, and names no command.
#
# Each ``Fix`` knows its site: the module and line of the code that built it (the first frame outside
# this module). When a command is asked to (``SUPERFLUID_FIX_LOG``, set by the test suite), every fix it
# renders is appended there as a JSON line, so that the suite's report can say which sites a test
# emitted and pasted (scripts/fix-report).

__all__ = ["Fix", "FixLike", "fixes_of", "render", "remedy", "as_json", "record_to",
           "repair", "ENV_LOG"]

#: the variable that names the file every rendered fix is appended to (the test suite's report)
ENV_LOG = "SUPERFLUID_FIX_LOG"

_HERE = __name__


def _site() -> str:
    """``module:line`` of the first frame outside this module: the code that built the fix."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_globals.get("__name__") == _HERE or frame.f_code.co_filename == "<string>"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?"
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_lineno}"


@dataclass(frozen=True, slots=True)
class Fix:
    """A command to run (``argv``) and what it does, in a few words (``does``: "puts it back")."""

    argv: tuple[str, ...]
    does: str
    site: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a fix names a command")
        if not self.site:
            object.__setattr__(self, "site", _site())

    @classmethod
    def superfluid(cls, *words: str, does: str) -> Fix:
        """``superfluid WORDS...``, which ``does``."""
        return cls(("superfluid", *words), does, _site())

    @classmethod
    def carried(cls, argv: Sequence[str], does: str, site: str) -> Fix:
        """A fix another process built (a worker's report), rebuilt with the site that built it there:
        not a site of its own (``?`` when the report named none)."""
        return cls(tuple(argv), does, site or "?")

    @property
    def command(self) -> str:
        """The command as a shell runs it: each word quoted where it needs to be."""
        return shlex.join(self.argv)

    def text(self) -> str:
        return f"`{self.command}` {self.does}"

    def adding(self, *words: str) -> Fix:
        """The same fix with ``words`` after its command (a flag the line gave)."""
        return Fix((*self.argv, *words), self.does, self.site)

    def as_json(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "does": self.does}


FixLike = Fix | Sequence[Fix] | None


def fixes_of(value: FixLike) -> tuple[Fix, ...]:
    if value is None:
        return ()
    if isinstance(value, Fix):
        return (value,)
    return tuple(value)


def render(fixes: Sequence[Fix]) -> str:
    """The fixes in text, in order: "`superfluid runtime repair basert 0.4.0-cpu` puts it back; or …"."""
    _log(fixes)
    return "; or ".join(f.text() for f in fixes)


def remedy(advice: str | None, fixes: Sequence[Fix]) -> str:
    """What fixes a fault, for people: its advice, then its fixes rendered, "; or " between; "" when
    nothing does (what follows ``<message>: `` in every error, verdict and report line)."""
    return "; or ".join(t for t in (advice, render(fixes) if fixes else "") if t)


def as_json(fixes: Sequence[Fix]) -> dict[str, Any]:
    """``{"fix": COMMAND, "fixes": [{"argv", "does"}, …]}``, or ``{}`` without a fix."""
    if not fixes:
        return {}
    _log(fixes)
    return {"fix": fixes[0].command, "fixes": [f.as_json() for f in fixes]}


def repair(runtime_id: str, install: str) -> Fix:
    """The fix of a broken install: repair it as its receipt records it."""
    return Fix(("superfluid", "runtime", "repair", runtime_id, install), "puts it back", _site())


# -- the log the test suite's report reads ---------------------------------------------------------

_LOG: list[str] = []


def record_to(path: str | None) -> None:
    """Append every fix rendered from now on to ``path`` (a JSON line each); ``None`` stops it."""
    _LOG[:] = [path] if path else []


def _log(fixes: Sequence[Fix]) -> None:
    if not _LOG or not fixes:
        return
    lines = "".join(json.dumps({"site": f.site, "argv": list(f.argv), "does": f.does}) + "\n" for f in fixes)
    try:
        fd = os.open(_LOG[0], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, lines.encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # the report is the suite's; a command never fails for it

