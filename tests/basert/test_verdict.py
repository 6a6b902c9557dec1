"""``runtime/basert/verdict.judge`` on facts, no library: symbols first, then the ABI number (or the
unnumbered line), then how the configuration is read. The real variants are tests/basert/test_loader.py."""

from __future__ import annotations

from typing import Any

import pytest

from superfluid.runtime.basert.header import ABI_VERSION, UNNUMBERED_LINE
from superfluid.runtime.basert.verdict import ADVICE, LibraryVerdict, Probe, fix, judge
from superfluid.runtime.kernel.errors import AbiRefused, LibraryRefused

PATH = "/x/libbaseRT.so"
OK = {"version": "0.4.0", "abi": 1, "has_into": True, "config_size": 1792}

JUDGE = [
    pytest.param({}, "into", None, id="numbered-with-into"),
    pytest.param({"has_into": False}, "by-value", None, id="numbered-by-value-same-size"),
    pytest.param({"version": "9.9.9"}, "into", None, id="number-wins-over-version-string"),
    pytest.param({"version": None}, "into", None, id="numbered-without-version-string"),
    pytest.param({"has_into": True, "config_size": 4000}, "into", None, id="into-reads-any-size"),
    pytest.param({"has_into": True, "config_size": None}, "into", None, id="into-needs-no-sizeof"),
    pytest.param({"has_into": False, "config_size": 1704}, None, "in 1704 bytes where", id="by-value-other-size"),
    pytest.param({"has_into": False, "config_size": 1793}, None, "in 1793 bytes where", id="by-value-one-byte-more"),
    pytest.param({"has_into": False, "config_size": None}, None, "bytes where this superfluid expects 1792",
                 id="by-value-no-sizeof"),
    pytest.param({"abi": 2}, None, "states ABI 2; this superfluid drives ABI 1", id="other-number"),
    pytest.param({"abi": 0}, None, "states ABI 0;", id="number-zero"),
    pytest.param({"abi": -1}, None, "states ABI -1;", id="number-negative"),
    pytest.param({"abi": 2, "version": "0.3.0"}, None, "states ABI 2;", id="number-beats-unnumbered-line"),
    pytest.param({"abi": None, "version": "0.3.7", "has_into": False}, "by-value", None, id="unnumbered-0.3.x"),
    pytest.param({"abi": None, "version": "0.3.0", "has_into": True}, "into", None, id="unnumbered-with-into"),
    pytest.param({"abi": None, "version": "0.4.0"}, None, "only the unnumbered 0.3.x line", id="unnumbered-0.4"),
    pytest.param({"abi": None, "version": "0.30.1"}, None, "is version '0.30.1'", id="unnumbered-0.30-not-0.3"),
    pytest.param({"abi": None, "version": "garbage"}, None, "is version 'garbage'", id="unnumbered-garbage"),
    pytest.param({"abi": None, "version": ""}, None, "is version ''", id="unnumbered-empty"),
    pytest.param({"abi": None, "version": None}, None, "is version ''", id="unnumbered-no-version-string"),
    pytest.param({"missing": "baseRT_prefill", "abi": 2}, None, "lacks baseRT_prefill", id="symbols-first"),
    pytest.param({"missing": "baseRT_prefill", "has_into": False, "config_size": 1}, None, "lacks baseRT_prefill",
                 id="symbols-before-size"),
]


@pytest.mark.parametrize(("change", "config_read", "refusal"), JUDGE)
def test_judge(change: dict[str, Any], config_read: str | None, refusal: str | None) -> None:
    verdict = judge(Probe(path=PATH, **{**OK, **change}), 1792, drives=1, line="0.3")
    assert verdict.config_read == config_read
    if refusal is None:
        assert verdict.serves and verdict.refusal is None
    else:
        assert not verdict.serves and verdict.refusal is not None
        assert refusal in verdict.refusal.message and PATH in verdict.refusal.message


# which kind of refusal, and what it carries: the face and `check --json` read these fields
KINDS = [
    pytest.param({"abi": 2}, AbiRefused, True, "0.4.0", 2, id="by-number"),
    pytest.param({"abi": 2, "version": None}, AbiRefused, True, None, 2, id="by-number-no-version"),
    pytest.param({"abi": None, "version": "0.2.6"}, LibraryRefused, True, "0.2.6", None, id="off-the-line"),
    pytest.param({"missing": "baseRT_free"}, LibraryRefused, False, None, None, id="missing-symbol"),
    pytest.param({"has_into": False, "config_size": 4}, LibraryRefused, False, None, None, id="wrong-size"),
]


@pytest.mark.parametrize(("change", "kind", "by_abi", "stated_version", "stated_abi"), KINDS)
def test_the_refusal_carries_its_facts(change: dict[str, Any], kind: type[LibraryRefused], by_abi: bool,
                                       stated_version: str | None, stated_abi: int | None) -> None:
    refusal = judge(Probe(path=PATH, **{**OK, **change}), 1792, drives=1, line="0.3").refusal
    assert refusal is not None and type(refusal) is kind
    assert (refusal.path, refusal.by_abi, refusal.stated_version, refusal.stated_abi) == (
        PATH, by_abi, stated_version, stated_abi)
    assert refusal.fixes == (fix(),) and refusal.advice == ADVICE
    if isinstance(refusal, AbiRefused):
        assert (refusal.stated, refusal.drives) == (stated_abi, 1)


@pytest.mark.parametrize(("drives", "line", "probe", "serves"), [
    pytest.param(2, "0.5", Probe(path="/x", version="0.5.2", config_size=1792), True, id="another-abi-its-own-line"),
    pytest.param(2, "0.5", Probe(path="/x", version="0.3.0", config_size=1792), False, id="another-abi-not-our-line"),
    pytest.param(2, None, Probe(path="/x", version="0.3.0", config_size=1792), False, id="no-unnumbered-line"),
    pytest.param(2, None, Probe(path="/x", version="0.3.0", abi=2, config_size=1792), True, id="no-line-but-numbered"),
    pytest.param(3, "0.3", Probe(path="/x", version="0.4.0", abi=1, has_into=True), False, id="our-old-number"),
])
def test_what_it_drives_is_an_argument(drives: int, line: str | None, probe: Probe, serves: bool) -> None:
    assert judge(probe, 1792, drives=drives, line=line).serves is serves


def test_an_abi_without_unnumbered_line_refuses_every_unnumbered_library() -> None:
    verdict = judge(Probe(path="/x", version="0.3.0", config_size=1792), 1792, drives=2, line=None)
    assert verdict.refusal is not None and "no unnumbered release carries ABI 2" in verdict.refusal.message


def test_the_defaults_are_our_header() -> None:
    """Without ``drives``/``line`` the verdict is for the ABI and line our header states."""
    numbered = Probe(path=PATH, version="9.9.9", abi=ABI_VERSION, has_into=True)
    assert judge(numbered, 1792) == LibraryVerdict("into")
    assert judge(Probe(path=PATH, version="9.9.9", abi=ABI_VERSION + 1, has_into=True), 1792).serves is False
    assert UNNUMBERED_LINE is not None
    assert judge(Probe(path=PATH, version=f"{UNNUMBERED_LINE}.9", config_size=1792), 1792).config_read == "by-value"


def test_the_size_compared_is_the_callers() -> None:
    """``our_size`` is the bindings' struct: the same library reads by value for one size only."""
    probe = Probe(path=PATH, version="0.3.0", abi=1, config_size=1700)
    assert judge(probe, 1700).config_read == "by-value"
    assert judge(probe, 1792).serves is False
