"""The baseRT ABI rule: does this superfluid drive what a library or a release states?

See docs/runtimes.md, "The ABI number and the unnumbered line".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from superfluid.runtime.basert.header import ABI_VERSION, UNNUMBERED_LINE
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.ordering import version_line

__all__ = ["AbiVerdict", "abi_verdict", "drives_of", "anyway"]


@dataclass(frozen=True, slots=True)
class AbiVerdict:
    """The rule's answer for ``version`` stating ``abi``, against the ABI ``drives`` (whose
    unnumbered release line is ``line``). ``by`` is how it is driven: ``"abi"`` (the number
    equals ours), ``"line"`` (unnumbered, of our line), or None (not driven)."""

    version: str | None
    abi: int | None
    drives: int
    line: str | None
    by: Literal["abi", "line"] | None

    @property
    def is_driven(self) -> bool:
        """Whether this superfluid drives it (``by`` is not None)."""
        return self.by is not None

    @property
    def carried(self) -> str:
        """Which unnumbered releases carry our ABI, as a clause."""
        if self.line:
            return f"only the unnumbered {self.line}.x line carries ABI {self.drives}"
        return f"no unnumbered release carries ABI {self.drives}"

    @property
    def short(self) -> str:
        """A few words, for a listing: ``ABI 1``, ``ABI 2; this superfluid drives ABI 1``..."""
        if self.abi is not None:
            return f"ABI {self.abi}" + ("" if self.is_driven else f"; this superfluid drives ABI {self.drives}")
        if self.is_driven:
            return f"unnumbered, of ABI {self.drives}'s {self.line} line"
        where = f"not of the {self.line} line" if self.line else "states no ABI number"
        return f"unnumbered {self.version}, {where}; this superfluid drives ABI {self.drives}"

    @property
    def why(self) -> str:
        """A sentence about a release: ``baseRT 0.4.0 states ABI 1, the ABI this superfluid drives``
        (``a baseRT library states ABI 2; ...`` when no version is known)."""
        v = f"baseRT {self.version}" if self.version is not None else "a baseRT library"
        if self.abi is not None:
            if self.is_driven:
                return f"{v} states ABI {self.abi}, the ABI this superfluid drives"
            return f"{v} states ABI {self.abi}; this superfluid drives ABI {self.drives}"
        if self.is_driven:
            return f"{v} states no ABI number and is of the {self.line}.x line, which carries ABI {self.drives}"
        return f"{v} states no ABI number; this superfluid drives ABI {self.drives}, and {self.carried}"


def drives_of(part: Mapping[str, Any] | None) -> tuple[int, str | None]:
    """What a compat document's ``runtimes.basert`` part drives: the ABI number it requires and its
    unnumbered line (None: ours, from our header).

    Raises:
        BadFile: the part states no ABI number.
    """
    if part is None:
        return ABI_VERSION, UNNUMBERED_LINE
    abi = (part.get("requires") or {}).get("abi")
    if not isinstance(abi, int) or isinstance(abi, bool):
        raise BadFile("the compat document", "states no ABI number for basert",
                      json_path="$.runtimes.basert.requires.abi")
    line = part.get("unnumbered_line")
    return abi, line if isinstance(line, str) else None


def abi_verdict(version: str | None, abi: int | None, *, drives: int = ABI_VERSION,
                line: str | None = UNNUMBERED_LINE) -> AbiVerdict:
    """The rule on ``version`` stating ``abi`` (None: states no number), for a superfluid driving
    ABI ``drives`` whose unnumbered line is ``line`` (see the module doc).

    >>> abi_verdict("0.5.0", 2, drives=1, line="0.3").short
    'ABI 2; this superfluid drives ABI 1'
    >>> abi_verdict("0.03.1", None, drives=1, line="0.3").by
    'line'
    >>> abi_verdict("0.2.6", None, drives=1, line="0.3").short
    'unnumbered 0.2.6, not of the 0.3 line; this superfluid drives ABI 1'
    """
    by: Literal["abi", "line"] | None
    if abi is not None:
        by = "abi" if abi == drives else None
    else:
        by = "line" if line is not None and version_line(version) == line else None
    return AbiVerdict(version, abi, drives, line, by)


def anyway(version: str) -> Fix:
    """The fix of a version this superfluid does not drive: the command that installs it all the same."""
    return Fix.superfluid("runtime", "install", "basert", "--version", version, "--untested",
                          does=f"installs {version} anyway")
