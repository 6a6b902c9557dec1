"""Hints that keep the source the user named (``--mirror``, ``--offline``, ``--plain-http``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

from superfluid.runtime.kernel.errors import ELSEWHERE
from superfluid.runtime.kernel.redact import redact_url

__all__ = ["SOURCE_FLAGS", "given", "keep_source", "shown", "fitting"]

#: the source flags of the commands a hint may name
SOURCE_FLAGS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("runtime", "install"): ("--mirror", "--offline", "--plain-http"),
    ("runtime", "update"): ("--mirror", "--offline", "--plain-http"),
    ("runtime", "repair"): ("--mirror", "--offline", "--plain-http"),
    ("runtime", "versions"): ("--mirror", "--offline"),
    ("lock",): ("--mirror", "--offline", "--plain-http"),
    ("serve",): ("--offline",),
}
_HINT = re.compile(r"`(superfluid [^`\n]+)`")
_WITHOUT_OFFLINE = re.compile(r"\s*(once )?without --offline")

Flags = Sequence[tuple[str, "str | None"]]


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


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def keep_source(text: str, flags: Flags) -> str:
    """``text`` with each suggested ``superfluid`` command carrying ``flags`` it takes and lacks."""
    if not flags:
        return text

    def extended(m: re.Match[str]) -> str:
        words = _words(m.group(1))
        key = tuple(words[1:3]) if words[1:2] == ["runtime"] else tuple(words[1:2])
        takes = SOURCE_FLAGS.get(key, ())
        add: list[str] = []
        for flag, value in flags:
            if flag not in takes or flag in words or (flag == "--mirror" and "--from" in words):
                continue
            if flag == "--offline" and _WITHOUT_OFFLINE.match(text, m.end()):
                continue  # the hint is to fill the cache: online, from the same mirror
            add += [flag] if value is None else [flag, shlex.quote(value)]
        return f"`{m.group(1)} {' '.join(add)}`" if add else m.group(0)

    return _HINT.sub(extended, text)


def fitting(text: str, *, takes_both: bool) -> str:
    """``text`` without a suggestion of flags the command does not take (``takes_both``: it takes
    ``--mirror`` and ``--offline``): a network fault's "or install from elsewhere with --mirror URL|DIR ...
    or --offline" is for the commands that take both (``runtime install``, ``lock``...), not ``mirror
    push`` or ``compat --service``."""
    if takes_both:
        return text
    return text.replace(ELSEWHERE, "")
