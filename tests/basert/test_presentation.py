"""``runtime/basert/presentation``: how the manifest and the face show baseRT: the ABI rule asked as a
manifest question, the values a release names, its cell, its compat lines, its notes."""

from __future__ import annotations

from typing import Any

import pytest

from superfluid.runtime import registry
from superfluid.runtime.basert.adapter import ADAPTER
from superfluid.runtime.basert.presentation import PRESENTATION as BASERT

PART = {"requires": {"header": "0.4.0", "abi": 1}, "unnumbered_line": "0.3",
        "installs": [{"version": "0.4.0", "abi": 1, "platforms": ["linux-arm64", "macos-arm64"]},
                     {"version": "0.3.0", "abi": None, "platforms": ["macos-arm64"]}]}


@pytest.mark.parametrize(("kind", "value", "by"), [
    pytest.param("abi", "1", "abi", id="our-number"),
    pytest.param("abi", "2", None, id="another-number"),
    pytest.param("version", "0.3.7", "line", id="unnumbered-of-the-line"),
    pytest.param("version", "0.2.6", None, id="unnumbered-off-the-line"),
    pytest.param("version", "0.30.0", None, id="unnumbered-0.30-is-not-0.3"),
])
def test_judge_is_the_abi_rule_for_the_parts_requires(kind: str, value: str, by: str | None) -> None:
    row = BASERT.judge(PART, kind, value, None, "superfluid 1.0")
    assert row["by"] == by
    assert row["requires"] == PART["requires"] and row["unnumbered_line"] == "0.3"
    assert "installs" not in row  # no platform asked


@pytest.mark.parametrize(("part", "kind", "value", "by"), [
    pytest.param({"requires": {"abi": 2}}, "abi", "2", "abi", id="a-release-of-abi-2"),
    pytest.param({"requires": {"abi": 2}}, "version", "0.3.0", None, id="abi-2-has-no-unnumbered-line"),
    pytest.param({"requires": {"abi": 2}, "unnumbered_line": "0.5"}, "version", "0.5.1", "line",
                 id="its-own-line"),
])
def test_judge_reads_the_releases_part_not_ours(part: dict[str, Any], kind: str, value: str, by: str | None) -> None:
    assert BASERT.judge(part, kind, value, None, "superfluid 9.0")["by"] == by


@pytest.mark.parametrize(("platform", "installs"), [
    pytest.param("macos-arm64", ["0.4.0", "0.3.0"], id="both"),
    pytest.param("linux-arm64", ["0.4.0"], id="one"),
    pytest.param("linux-x64", [], id="none"),
])
def test_judge_with_a_platform_names_the_pins_it_installs_there(platform: str, installs: list[str]) -> None:
    assert BASERT.judge(PART, "abi", "1", platform, "superfluid 1.0")["installs"] == installs


def test_named_is_every_value_a_release_names() -> None:
    assert list(BASERT.named(PART)) == [("abi", "1"), ("abi", "1"), ("version", "0.3.0")]
    assert list(BASERT.named({"requires": {"abi": 2}})) == [("abi", "2")]


@pytest.mark.parametrize(("part", "cell"), [
    pytest.param(PART, "ABI 1; unnumbered 0.3.x", id="with-a-line"),
    pytest.param({"requires": {"abi": 2}, "unnumbered_line": None}, "ABI 2", id="no-line"),
])
def test_drives_cell(part: dict[str, Any], cell: str) -> None:
    assert BASERT.drives_cell(part) == cell


def test_shown_is_a_line_and_a_table_of_installs() -> None:
    shown = BASERT.shown(PART)
    assert shown.line == "basert: drives baseRT ABI 1 (header 0.4.0); unnumbered libraries of the 0.3 line too"
    assert shown.header == ("INSTALLS", "ABI", "PLATFORMS")
    assert shown.rows == (("0.4.0", "1", "linux-arm64, macos-arm64"), ("0.3.0", "unnumbered", "macos-arm64"))
    bare = BASERT.shown({"requires": {"abi": 2, "header": "0.6.0"}, "installs": [{"abi": 2}]})
    assert bare.line.endswith("(header 0.6.0)") and bare.rows == (("?", "2", "-"),)


@pytest.mark.parametrize(("row", "note"), [
    pytest.param({"abi": 1}, "ABI 1", id="numbered"),
    pytest.param({"abi": None}, "unnumbered", id="unnumbered"),
    pytest.param({}, "", id="no-abi-key"),
])
def test_version_note(row: dict[str, Any], note: str) -> None:
    assert BASERT.version_note(row) == note


def test_requires_text_and_the_compat_it_states_agree() -> None:
    assert BASERT.requires_text(ADAPTER.compat()["requires"]) == \
        "basert: this superfluid drives baseRT ABI 1 (header 0.4.0)"


@pytest.mark.parametrize("value", ["1", "2", "123456789"])
def test_the_abi_question_takes_numbers_without_leading_zeros(value: str) -> None:
    abi = BASERT.question("abi")
    assert abi is not None and abi.usable(value) and not abi.usable("0" + value) and abi.number


def test_the_registry_answers_it() -> None:
    assert registry.presentation("basert") is BASERT and BASERT.id == "basert" and BASERT.numbered_abi
