"""Hints that keep the source the user named (``--mirror``, ``--offline``, ``--plain-http``) and the recorded mirror."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["SOURCE_FLAGS", "given", "keep_source", "shown", "recorded_mirror", "recorded_hint"]

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


def given(args: argparse.Namespace | None) -> list[tuple[str, str | None]]:
    """The source flags on the command line ``args`` parsed: ``(flag, value or None)``."""
    if args is None:
        return []
    out: list[tuple[str, str | None]] = []
    mirror = getattr(args, "mirror", None)
    if isinstance(mirror, str) and mirror:
        out.append(("--mirror", shown(mirror)))
    out += [(flag, None) for flag, dest in (("--offline", "offline"), ("--plain-http", "plain_http"))
            if getattr(args, dest, False) is True]
    return out


def shown(mirror: str) -> str:
    """A mirror as a hint names it: a ``file://`` root as its directory, a URL without credentials."""
    from superfluid.runtime.redact import redact_url

    if mirror.startswith("file://"):
        from urllib.parse import unquote, urlsplit

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


def recorded_mirror(runtime_id: str, environ: Mapping[str, str], install: str | None = None) -> str | None:
    """The mirror root the runtime's installs came from, as their receipts record it
    (``restore.mirror_of``): ``install``'s when it is named and its receipt reads, else the one
    every readable install that records a mirror records; None when there is none, or several."""
    from superfluid.installer.config import DEFAULT_GITHUB_API
    from superfluid.installer.home.restore import mirror_of
    from superfluid.installer.home.store import list_installs, runtime_root
    from superfluid.installer.sources.github import web_base_for
    from superfluid.runtime.home import home

    web = web_base_for(environ.get("SUPERFLUID_GITHUB_API") or DEFAULT_GITHUB_API)
    found = list_installs(runtime_root(home(environ), runtime_id))
    named = [i for i in found if i.name == install and i.receipt is not None]
    roots = {mirror_of(i.receipt, github_web=web) for i in (named or found) if i.receipt is not None}
    roots.discard(None)
    return roots.pop() if len(roots) == 1 else None


@contextmanager
def recorded_hint(args: argparse.Namespace, environ: Mapping[str, str]) -> Iterator[None]:
    """When a command that named no mirror cannot read its releases (offline, the cache lacks the
    listing; online, the network failed) and the runtime's installs came from a mirror, the fix
    names that mirror."""
    from superfluid.installer.errors import DownloadError, OfflineMissing

    try:
        yield
    except (OfflineMissing, DownloadError) as e:
        if getattr(args, "mirror", None) or environ.get("SUPERFLUID_MIRROR") or getattr(args, "from_", None):
            raise
        root = recorded_mirror(args.id, environ)
        if root is None:
            raise
        words = ["superfluid", "runtime", args.sub, args.id, *(["--offline"] if args.offline else []),
                 "--mirror", shlex.quote(shown(root))]
        e.fix = (f"the installs of {args.id} here came from the mirror {shown(root)}: `{' '.join(words)}` reads it"
                 + (f"; or {e.fix}" if e.fix else ""))
        raise
