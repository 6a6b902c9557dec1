"""The source a line named (``--mirror``, ``--offline``, ``--plain-http``), as hints show it: the flags a
fix carries (``with_flags``, by what its command takes in the command tree) and the advice a command
that takes neither names (``fitting``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit

from superfluid.command_index import MODEL
from superfluid.runtime.kernel.errors import ELSEWHERE
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.redact import redact_url

__all__ = ["SOURCE_FLAGS", "given", "shown", "takes", "with_flags", "fitting"]

#: the flags that say where a line installs from
SOURCE_FLAGS = ("--mirror", "--offline", "--plain-http")
#: command path -> the source flags it takes, read from the command tree (``command_index.MODEL``)
_TAKES: dict[str, tuple[str, ...]] = {
    path: taken for path, _, flags, *_ in MODEL
    if (taken := tuple(f for f in SOURCE_FLAGS if any(f in names for names, _ in flags)))}

def given(*, mirror: str | None = None, offline: bool = False, plain_http: bool = False) -> list[tuple[str,
                                                                                                       str | None]]:
    """The source flags a command line gave (``--mirror``, ``--offline``, ``--plain-http``): ``(flag, value
    or None)``."""
    out: list[tuple[str, str | None]] = []
    if mirror:
        out.append(("--mirror", shown(mirror)))
    out += [(flag, None) for flag, on in (("--offline", offline), ("--plain-http", plain_http)) if on]
    return out


def shown(mirror: str) -> str:
    """A mirror as a hint names it: a ``file://`` root as its directory, a URL without credentials."""
    if mirror.startswith("file://"):
        return unquote(urlsplit(mirror).path).rstrip("/") or "/"
    return redact_url(mirror)


def fitting(text: str, *, takes_both: bool) -> str:
    """``text`` without a suggestion of flags the command does not take (``takes_both``: it takes
    ``--mirror`` and ``--offline``): a network fault's "or install from elsewhere with --mirror URL|DIR ...
    or --offline" is for the commands that take both (``runtime install``, ``lock``...), not ``mirror
    push`` or ``compat --service``."""
    if takes_both:
        return text
    return text.replace(ELSEWHERE, "")


def takes(argv: Sequence[str]) -> tuple[str, ...]:
    """The source flags the ``superfluid`` command ``argv`` names takes (none for another program)."""
    if not argv or argv[0] != "superfluid":
        return ()
    return next((_TAKES[p] for n in (2, 1) if (p := " ".join(argv[1:1 + n])) in _TAKES), ())


def with_flags(fix: Fix, flags: Iterable[tuple[str, str | None]]) -> Fix:
    """``fix`` carrying each of ``flags`` (``(flag, value or None)``, as the line gave them) that its
    command takes and lacks; a fix that names ``--from`` or ``--mirror`` keeps its own source, and one
    that fills the cache (its ``does`` says so) is not given ``--offline``."""
    add: list[str] = []
    for flag, value in flags:
        if flag not in takes(fix.argv) or flag in fix.argv:
            continue
        if flag == "--mirror" and "--from" in fix.argv:
            continue
        if flag == "--offline" and fix.does.startswith("fills the cache"):
            continue
        add += [flag] if value is None else [flag, value]
    return fix.adding(*add) if add else fix
