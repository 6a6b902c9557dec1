"""The loader's verdict on a libbaseRT: does this build drive it, and how is its config read.

See docs/runtimes.md, "How a library is judged".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from superfluid.runtime.basert.abi import abi_verdict
from superfluid.runtime.basert.header import ABI_VERSION, HEADER_VERSION, UNNUMBERED_LINE
from superfluid.runtime.kernel.errors import AbiRefused, LibraryRefused
from superfluid.runtime.kernel.fixes import Fix

__all__ = ["Probe", "LibraryVerdict", "ConfigRead", "ADVICE", "fix", "judge"]

ConfigRead = Literal["into", "by-value"]

#: what a refused library's user may do besides installing one: name another
ADVICE = "name another with --basert-lib or BASERT_LIB"


def fix() -> Fix:
    """The fix of a libbaseRT this superfluid does not drive: install one it does."""
    return Fix.superfluid("runtime", "install", "basert", does="installs one this superfluid drives")


@dataclass(kw_only=True, frozen=True, slots=True)
class Probe:
    """What a probe found in a library, without calling anything unsafe."""

    path: str
    missing: str | None = None  # the first bound symbol that does not resolve
    version: str | None = None  # baseRT_version_string()
    abi: int | None = None  # baseRT_abi_version(), None when not exported (unnumbered)
    has_into: bool = False  # exports baseRT_get_config_into
    config_size: int | None = None  # baseRT_model_config_sizeof()


@dataclass(frozen=True, slots=True)
class LibraryVerdict:
    """``config_read`` when the library serves; else ``refusal``, the typed error to raise."""

    config_read: ConfigRead | None
    refusal: LibraryRefused | None = None

    @property
    def serves(self) -> bool:
        return self.refusal is None


def _refuse(path: str, message: str) -> LibraryVerdict:
    return LibraryVerdict(None, LibraryRefused(path, message, fix=fix(), advice=ADVICE))


def judge(probe: Probe, our_size: int, *, drives: int = ABI_VERSION,
          line: str | None = UNNUMBERED_LINE) -> LibraryVerdict:
    """The verdict on ``probe``, for bindings whose config struct is ``our_size`` bytes,
    driving ABI ``drives`` whose unnumbered release line is ``line``."""
    p = probe.path
    if probe.missing:
        return _refuse(p, f"libbaseRT at {p} lacks {probe.missing}: it is not a baseRT library this "
                          f"superfluid drives (header {HEADER_VERSION}, ABI {drives})")
    rule = abi_verdict(probe.version, probe.abi, drives=drives, line=line)
    if not rule.is_driven and probe.abi is not None:
        return LibraryVerdict(None, AbiRefused(p, probe.abi, drives, fix=fix(), advice=ADVICE,
                                                     version=probe.version))
    if not rule.is_driven:
        return LibraryVerdict(None, LibraryRefused(
            p, f"libbaseRT at {p} is version {probe.version or ''!r} and states no ABI number; this superfluid "
               f"drives ABI {drives}, and {rule.carried}", fix=fix(), advice=ADVICE, by_abi=True,
            stated_version=probe.version))
    if probe.has_into:
        return LibraryVerdict("into")
    if probe.config_size != our_size:
        return _refuse(p, f"libbaseRT at {p} ({probe.version}) lays out a model's configuration in "
                          f"{probe.config_size} bytes where this superfluid expects {our_size}, and has "
                          f"no baseRT_get_config_into to read it by size")
    return LibraryVerdict("by-value")
