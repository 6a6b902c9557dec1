"""What our baseRT header states: the header version and the ABI number this build drives."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from superfluid.runtime.kernel.errors import BadFile

__all__ = [
    "HEADER_PATH",
    "HeaderFacts",
    "parse_header",
    "read_header",
    "unnumbered_line",
    "FACTS",
    "HEADER_VERSION",
    "ABI_VERSION",
    "UNNUMBERED_LINE",
    "REQUIRES",
]

HEADER_PATH = Path(__file__).resolve().parent / "include" / "baseRT.h"

_MACROS = ("BASERT_VERSION_MAJOR", "BASERT_VERSION_MINOR", "BASERT_VERSION_PATCH", "BASERT_ABI_VERSION")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(BASERT_[A-Z_]+)[ \t]+(\S+)[ \t]*$", re.MULTILINE)

# ABI history (SPEC §4.1), a fact of baseRT's releases rather than of the header: the release line
# whose libraries carry an ABI's functions and layouts without stating its number. 0.3.0 carries
# ABI 1 unstated; no later ABI has unnumbered libraries.
_UNNUMBERED_LINES = {1: (0, 3)}


@dataclass(frozen=True, slots=True)
class HeaderFacts:
    """The four macros of our header."""

    major: int
    minor: int
    patch: int
    abi: int

    @property
    def version(self) -> str:
        """``MAJOR.MINOR.PATCH``, e.g. ``1.22.3``."""
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_header(text: str, where: str = "baseRT.h") -> HeaderFacts:
    """Read the version and ABI macros from the text of a header.

    Each of ``BASERT_VERSION_MAJOR/MINOR/PATCH`` and ``BASERT_ABI_VERSION`` must be defined exactly
    once, on its own line, as a decimal integer.

    Raises:
        BadFile: a macro is missing, repeated, or not a decimal integer (names the macro).
    """
    found: dict[str, list[str]] = {}
    for name, value in _DEFINE.findall(text):
        found.setdefault(name, []).append(value)
    values: dict[str, int] = {}
    for name in _MACROS:
        seen = found.get(name, [])
        if len(seen) != 1:
            fault = "is not defined" if not seen else f"is defined {len(seen)} times"
            raise BadFile(where, f"{name} {fault} (expected one line `#define {name} <integer>`)")
        if not seen[0].isdigit():
            raise BadFile(where, f"{name} is {seen[0]!r}, not a decimal integer")
        values[name] = int(seen[0])
    return HeaderFacts(*(values[name] for name in _MACROS))


def read_header(path: Path = HEADER_PATH) -> HeaderFacts:
    """Read the macros of the header at ``path`` (default: ours, shipped as package data).

    Raises:
        BadFile: the header cannot be read, or as ``parse_header``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadFile(str(path), f"cannot read our baseRT header ({e.strerror or e})",
                      advice="reinstall superfluid") from e
    return parse_header(text, str(path))


def unnumbered_line(abi: int) -> str | None:
    """The release line (``"0.3"``) whose libraries carry ABI ``abi`` without stating it, or None."""
    line = _UNNUMBERED_LINES.get(abi)
    return f"{line[0]}.{line[1]}" if line else None


FACTS = read_header()
HEADER_VERSION: str = FACTS.version
ABI_VERSION: int = FACTS.abi
UNNUMBERED_LINE: str | None = unnumbered_line(ABI_VERSION)
REQUIRES: dict[str, str | int] = {"header": HEADER_VERSION, "abi": ABI_VERSION}
