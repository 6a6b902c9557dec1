"""How baseRT is shown: the ABI it drives, its pins, and the manifest's questions by the ABI rule.

See docs/adapters.md, "How it is shown".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.runtime.basert.abi import abi_verdict, drives_of
from superfluid.runtime.presentation import Presentation, Question, ServeFlag, Shown

__all__ = ["BasertPresentation", "PRESENTATION", "QUESTIONS"]

#: what the compat manifest is asked about baseRT: the ABI a library states, or an unnumbered one's version
QUESTIONS: tuple[Question, ...] = (
    Question(kind="abi", pattern=r"[1-9][0-9]{0,8}", expected="a positive whole number without leading zeros, e.g. 2",
             words="ABI {value}", metavar="N", flag="a library stating ABI N", number=True),
    Question(kind="version", words="unnumbered version {value}", flag="an unnumbered library's version",
             note=" (unnumbered)"),
)


class BasertPresentation(Presentation):
    """baseRT's libraries state an ABI number (or none, on the unnumbered line): every word about it says which."""

    numbered_abi = True
    questions = QUESTIONS
    serve_flags = (ServeFlag("lib", "P", "the libbaseRT file or directory to serve with (else BASERT_LIB, else the "
                                         "install's)"),)
    column = "baseRT"

    def judge(self, part: Mapping[str, Any], kind: str, value: str, platform: str | None,
              release: str) -> dict[str, Any]:
        """The ABI rule (``abi.abi_verdict``) for a library stating ABI ``value`` (``abi``) or an
        unnumbered one of version ``value`` (``version``), against the part's ``requires.abi`` and
        ``unnumbered_line``; with a platform, also the pins it installs there on its own."""
        drives, line = drives_of(part)
        if kind == "abi":
            rule = abi_verdict(None, int(value), drives=drives, line=line)
        else:
            rule = abi_verdict(value, None, drives=drives, line=line)
        row: dict[str, Any] = {"by": rule.by, "short": rule.short, "why": rule.why,
                               "requires": dict(part["requires"]), "unnumbered_line": line}
        if platform is not None:
            row["installs"] = [p["version"] for p in part.get("installs") or []
                               if platform in (p.get("platforms") or [])]
        return row

    def named(self, part: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """The ABI it requires, each pin's ABI, and the version of each unnumbered pin."""
        yield "abi", str(part["requires"]["abi"])
        for pin in part.get("installs") or []:
            yield ("abi", str(pin["abi"])) if pin.get("abi") is not None else ("version", str(pin["version"]))

    def drives_cell(self, part: Mapping[str, Any]) -> str:
        line = part.get("unnumbered_line")
        return f"ABI {part['requires']['abi']}" + (f"; unnumbered {line}.x" if line else "")

    def shown(self, part: Mapping[str, Any]) -> Shown:
        req = part["requires"]
        line = part.get("unnumbered_line")
        rows = tuple((i.get("version", "?"), "unnumbered" if i.get("abi") is None else str(i["abi"]),
                      ", ".join(i.get("platforms") or []) or "-") for i in part.get("installs") or [])
        return Shown(f"{self.id}: drives baseRT ABI {req.get('abi')} (header {req.get('header')})"
                     + (f"; unnumbered libraries of the {line} line too" if line else ""),
                     ("INSTALLS", "ABI", "PLATFORMS"), rows)

    def version_note(self, row: Mapping[str, Any]) -> str:
        return (self.abi_words(row["abi"]) or "") if "abi" in row else ""

    def requires_text(self, requires: Mapping[str, Any]) -> str | None:
        return f"{self.id}: this superfluid drives baseRT ABI {requires['abi']} (header {requires['header']})"


PRESENTATION = BasertPresentation("basert")
