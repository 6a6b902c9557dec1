"""How a runtime is shown: its compat part, ABI words and version notes, and what the manifest asks of it.

See docs/adapters.md, "How it is shown".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

__all__ = ["Presentation", "Question", "ServeFlag", "Shown", "VERSION_PATTERN", "by_kind"]

#: a version as a question spells it: one path segment (the manifest's release versions alike)
VERSION_PATTERN = r"[0-9A-Za-z][0-9A-Za-z.+_!-]{0,63}"


@dataclass(kw_only=True, frozen=True, slots=True)
class Question:
    """A kind of value the compat manifest is asked about a runtime (``/v1/choose/<id>/<kind>/<value>``,
    ``superfluid compat --service URL --runtime <id> --<kind> V``): its one spelling, and its words."""

    kind: str
    #: the canonical spelling, matched whole: one answer has one path (``2``, never ``02``)
    pattern: str = VERSION_PATTERN
    #: what a malformed value should have been
    expected: str = "a version, e.g. 0.3.0"
    #: the value asked, in words, ``{value}`` filled in (empty: ``<kind> {value}``)
    words: str = ""
    #: the value's name in ``--<kind>``'s usage
    metavar: str = "V"
    #: the value's name in a path of the index page and in a usage error (empty: ``metavar``)
    placeholder: str = ""
    #: what ``--<kind>`` names of this runtime, in its help (``a build, e.g. b11642``)
    flag: str = ""
    #: words after the path on the index page (`` (unnumbered)``)
    note: str = ""
    #: asked as a JSON integer in the answer's ``asked`` (``"abi": 2``)
    number: bool = False

    def usable(self, value: str) -> bool:
        """Whether ``value`` is the canonical spelling of this kind of value."""
        return re.fullmatch(self.pattern, value) is not None

    def named(self, value: str) -> str:
        """The value asked, in words: ``ABI 2``, ``build b11642``."""
        return (self.words or f"{self.kind} {{value}}").format(value=value)

    @property
    def sample(self) -> str:
        return self.placeholder or self.metavar


class ServeFlag(NamedTuple):
    """One of a runtime's options shown among serve's own flags, as ``--<id>-<option> METAVAR``."""

    option: str
    metavar: str
    words: str


class Shown(NamedTuple):
    """A compat part as ``superfluid compat`` prints it: one line, then a table when it has rows."""

    line: str
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


class Presentation:
    """How the face and the compat manifest show one runtime (``registry.presentation``). An engine
    subclasses it in its folder and names that module in its adapter's ``presentation_from``, whose
    ``PRESENTATION`` it is; without one, a runtime is shown by these defaults (docs/adapters.md)."""

    #: its libraries state an ABI number, or none (unnumbered): its plans, installs and row say which
    numbered_abi: ClassVar[bool] = False
    #: what the compat manifest is asked about it (``/v1/choose/<id>/<kind>/...``), its main one first
    questions: ClassVar[tuple[Question, ...]] = ()
    #: its options shown among serve's own flags (``superfluid serve --help``), with their words there
    serve_flags: ClassVar[tuple[ServeFlag, ...]] = ()
    #: the heading of the index page's column of what each release drives of it (empty: the id)
    column: ClassVar[str] = ""

    def __init__(self, runtime_id: str) -> None:
        self.id = runtime_id

    def abi_words(self, abi: int | None) -> str | None:
        """``ABI 2`` or ``unnumbered`` when its libraries state ABI numbers (``numbered_abi``); else None."""
        if not self.numbered_abi:
            return None
        return f"ABI {abi}" if abi is not None else "unnumbered"

    def question(self, kind: str) -> Question | None:
        """The question of ``kind`` it is asked, or None."""
        return next((q for q in self.questions if q.kind == kind), None)

    def judge(self, part: Mapping[str, Any], kind: str, value: str, platform: str | None,
              release: str) -> dict[str, Any]:
        """Whether a release (``release``: its name and version) whose compat part for this runtime is
        ``part`` drives the ``kind`` ``value`` (on ``platform``): ``{"by", "short", "why", ...}``, ``by``
        None when it does not (the manifest's ``/v1/choose`` rows).

        Raises:
            NotImplementedError: it declares no questions (the default).
        """
        raise NotImplementedError(f"the {self.id} runtime is asked no questions")

    def named(self, part: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """``(kind, value)`` of every value a release's part names: the answers a static export holds."""
        return iter(())

    def drives_cell(self, part: Mapping[str, Any]) -> str:
        """What a release drives of it, in one short cell (the index page, ``superfluid-manifest check``)."""
        return "yes"

    def shown(self, part: Mapping[str, Any]) -> Shown:
        """Its compat part as ``superfluid compat`` prints it (the options line follows, for all)."""
        return Shown(f"{self.id}:")

    def version_note(self, row: Mapping[str, Any]) -> str:
        """The NOTE of one of its ``versions`` rows in ``superfluid runtime versions``."""
        return ""

    def requires_text(self, requires: Mapping[str, Any]) -> str | None:
        """The line under ``superfluid runtimes`` for the ``requires`` its row states, or None."""
        return None


def by_kind(shown: Iterable[Presentation]) -> dict[str, list[tuple[Presentation, Question]]]:
    """Every kind of question the runtimes are asked, in name order, each with the runtimes asked it:
    those asked it first (their first question) before the others, each group in the order given."""
    found: dict[str, list[tuple[int, int, Presentation, Question]]] = {}
    for n, presentation in enumerate(shown):
        for rank, q in enumerate(presentation.questions):
            found.setdefault(q.kind, []).append((rank, n, presentation, q))
    return {kind: [(p, q) for _, _, p, q in sorted(found[kind], key=lambda f: f[:2])] for kind in sorted(found)}
