"""What the machine is beyond its libraries: its distribution, its kernel and its x86-64 level.

See docs/install.md, "What a build needs".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.hostfacts.factfiles import Unread, read_fact, under

__all__ = ["Distribution", "OS_RELEASE", "parse_os_release", "distribution", "kernel_release", "X86_64_LEVELS",
           "x86_64_level"]

#: where the distribution says what it is, in the order os-release(5) reads them
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
_OSRELEASE = "/proc/sys/kernel/osrelease"
_OS_RELEASE_MAX_BYTES = 64 << 10
_KERNEL_MAX_BYTES = 4096
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")
#: the x86-64 psABI's micro-architecture levels, each by the CPU features (``/proc/cpuinfo``'s names:
#: ``pni`` is SSE3, ``abm`` LZCNT) it adds to the one below; a level holds the features of those below
X86_64_LEVELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("v2", frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})),
    ("v3", frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})),
    ("v4", frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
)


@dataclass(frozen=True, slots=True)
class Distribution:
    """The distribution as its os-release file names it: ``ID`` (``debian``), ``VERSION_ID`` (``12``),
    ``PRETTY_NAME`` (``Debian GNU/Linux 12 (bookworm)``); each None when the file does not say."""

    id: str | None
    version_id: str | None
    pretty_name: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version_id": self.version_id, "pretty_name": self.pretty_name}


def _unquoted(value: str) -> str:
    """A value of os-release as a shell reads it: quotes taken off, ``\\"``, ``\\\\``, ``\\$`` and ``\\```
    unescaped."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return re.sub(r"\\([\"\\$`])", r"\1", value)


def parse_os_release(text: str) -> Distribution | None:
    """The distribution an os-release file's ``text`` names, or None when it names none of the three.

    >>> parse_os_release('ID=debian\\nVERSION_ID="12"\\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\\n')
    Distribution(id='debian', version_id='12', pretty_name='Debian GNU/Linux 12 (bookworm)')
    """
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = _ASSIGNMENT.fullmatch(line.strip())
        if m and m.group(1) in ("ID", "VERSION_ID", "PRETTY_NAME"):
            values[m.group(1)] = _unquoted(m.group(2))
    if not values:
        return None
    return Distribution(values.get("ID") or None, values.get("VERSION_ID") or None, values.get("PRETTY_NAME") or None)


def distribution(root: str, unread: list[Unread] | None = None) -> Distribution | None:
    """The distribution under ``root``: ``/etc/os-release``, else (not there) ``/usr/lib/os-release``;
    None when neither names one (one that is there and cannot be read goes to ``unread``)."""
    for path in OS_RELEASE:
        data = read_fact(root, path, "distribution", unread, max_bytes=_OS_RELEASE_MAX_BYTES)
        if data is not None:
            return parse_os_release(data.decode("utf-8", "replace"))
        if os.path.exists(under(root, path)):
            return None  # there, and refused: the next file is read only where this one is absent
    return None


def kernel_release(root: str, unread: list[Unread] | None = None) -> str | None:
    """The kernel's release (``6.1.0-18-amd64``): this machine's own on ``/``, else what
    ``<root>/proc/sys/kernel/osrelease`` says; None when it says nothing."""
    if root in ("", "/"):
        return os.uname().release or None
    data = read_fact(root, _OSRELEASE, "kernel", unread, max_bytes=_KERNEL_MAX_BYTES)
    text = data.decode("utf-8", "replace").strip() if data is not None else ""
    return text.splitlines()[0] if text else None


def x86_64_level(features: Iterable[str]) -> str:
    """The highest x86-64 psABI level (``v1``...``v4``) whose features, and those of every level
    below, are all among ``features`` (a CPU's ``/proc/cpuinfo`` flags).

    >>> x86_64_level({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3", "avx"})
    'v2'
    >>> x86_64_level(())
    'v1'
    """
    have = set(features)
    level = "v1"
    for name, needs in X86_64_LEVELS:
        if not needs <= have:
            break
        level = name
    return level
