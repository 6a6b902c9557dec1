"""``runtime/presentation``: the rules every runtime's presentation inherits (the canonical spelling of
a question, the order of questions across runtimes, ABI words) and the defaults a new engine gets; the
registry finds each runtime's own."""

from __future__ import annotations

import pytest

from superfluid.runtime import registry
from superfluid.runtime.presentation import VERSION_PATTERN, Presentation, Question, Shown, by_kind

# --- a question's one spelling ------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "usable"), [
    pytest.param("0.3.0", True, id="version"),
    pytest.param("b11642", True, id="build"),
    pytest.param("2", True, id="number"),
    pytest.param("1.0+local_x!y-z", True, id="every-allowed-sign"),
    pytest.param("a" * 64, True, id="64-characters"),
    pytest.param("a" * 65, False, id="65-characters"),
    pytest.param("", False, id="empty"),
    pytest.param(".3", False, id="leading-dot"),
    pytest.param("-1", False, id="leading-dash"),
    pytest.param("0.3/1", False, id="two-path-segments"),
    pytest.param("..", False, id="dot-dot"),
    pytest.param("0.3 ", False, id="trailing-space"),
    pytest.param("0.3\n", False, id="trailing-newline"),
    pytest.param("é", False, id="not-ascii"),
])
def test_the_default_pattern_is_one_path_segment(value: str, usable: bool) -> None:
    assert Question(kind="version").usable(value) is usable


def test_a_pattern_is_matched_whole() -> None:
    abi = Question(kind="abi", pattern=r"[1-9][0-9]{0,8}", words="ABI {value}", number=True)
    assert [abi.usable(v) for v in ("2", "02", "2a", "12")] == [True, False, False, True]
    assert VERSION_PATTERN == Question(kind="x").pattern


@pytest.mark.parametrize(("question", "named", "sample"), [
    pytest.param(Question(kind="version"), "version 0.3.0", "V", id="defaults"),
    pytest.param(Question(kind="abi", words="ABI {value}", metavar="N"), "ABI 0.3.0", "N", id="words-and-metavar"),
    pytest.param(Question(kind="build", metavar="B", placeholder="<build>"), "build 0.3.0", "<build>",
                 id="placeholder"),
])
def test_named_and_sample(question: Question, named: str, sample: str) -> None:
    assert question.named("0.3.0") == named
    assert question.sample == sample


# --- questions across runtimes ------------------------------------------------------------------------

def _asking(ident: str, *kinds: str) -> Presentation:
    cls = type(f"A{ident}", (Presentation,), {"questions": tuple(Question(kind=k) for k in kinds)})
    shown: Presentation = cls(ident)
    return shown


def test_by_kind_sorts_kinds_and_puts_the_main_askers_first() -> None:
    a, b, c = _asking("a", "version", "abi"), _asking("b", "abi"), _asking("c", "build", "version")
    got = by_kind([a, b, c])
    assert list(got) == ["abi", "build", "version"]
    assert [x.id for x, _ in got["abi"]] == ["b", "a"]  # b's first question, a's second
    assert [x.id for x, _ in got["version"]] == ["a", "c"]
    assert [q.kind for _, q in got["build"]] == ["build"]
    assert by_kind([]) == {} and by_kind([Presentation("bare")]) == {}


def test_by_kind_keeps_the_given_order_among_equals() -> None:
    x, y = _asking("x", "version"), _asking("y", "version")
    assert [a.id for a, _ in by_kind([y, x])["version"]] == ["y", "x"]


def test_question_lookup() -> None:
    a = _asking("a", "version", "abi")
    assert a.question("abi") is a.questions[1]
    assert a.question("build") is None


# --- ABI words -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("numbered", "abi", "words"), [
    pytest.param(False, 2, None, id="unnumbered-engine"),
    pytest.param(False, None, None, id="unnumbered-engine-no-abi"),
    pytest.param(True, 2, "ABI 2", id="numbered"),
    pytest.param(True, 0, "ABI 0", id="numbered-zero"),
    pytest.param(True, None, "unnumbered", id="numbered-engine-unnumbered-library"),
])
def test_abi_words(numbered: bool, abi: int | None, words: str | None) -> None:
    cls = type("Numbered", (Presentation,), {"numbered_abi": numbered})
    assert cls("bare").abi_words(abi) == words


# --- the defaults a new engine gets, and where the registry finds each ----------------------------------------

def test_the_defaults() -> None:
    p = Presentation("bare")
    assert (p.id, p.numbered_abi, p.questions, p.serve_flags, p.column) == ("bare", False, (), (), "")
    assert list(p.named({"x": 1})) == [] and p.drives_cell({}) == "yes" and p.question("version") is None
    assert p.shown({}) == Shown("bare:") and p.version_note({}) == "" and p.requires_text({"abi": 1}) is None
    with pytest.raises(NotImplementedError, match="no questions"):
        p.judge({}, "abi", "1", None, "superfluid 1.0")


@pytest.mark.parametrize("ident", registry.IDS)
def test_the_registry_finds_each_runtimes_own(ident: str) -> None:
    shown = registry.presentation(ident)
    assert shown.id == ident and (type(shown) is Presentation) == (registry.get(ident).presentation_from is None)
    assert registry.presentation(ident) is shown  # its module's one PRESENTATION


def test_a_runtime_that_names_no_presentation_gets_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = type("Plain", (type(registry.get("mlx")),), {"presentation_from": None})()
    monkeypatch.setattr(registry, "get", lambda runtime_id: plain)
    shown = registry.presentation("mlx")
    assert type(shown) is Presentation and shown.id == "mlx"
