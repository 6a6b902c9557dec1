"""The source a line named (``--mirror``, ``--offline``, ``--plain-http``), as hints show it: the flags a
fix carries (``fixes.with_flags``) and the advice a command that takes neither names (``fitting``)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from superfluid.runtime.kernel.errors import ELSEWHERE
from superfluid.runtime.kernel.redact import redact_url

__all__ = ["given", "shown", "fitting"]

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
