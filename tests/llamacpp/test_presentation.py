"""``runtime/llamacpp/presentation``: how the manifest and the face show llama.cpp: membership of a
release's tested builds asked as a manifest question, the builds it names, its cell, table and notes."""

from __future__ import annotations

from typing import Any

import pytest

from superfluid.runtime import registry
from superfluid.runtime.llamacpp.presentation import PRESENTATION as LLAMACPP

PART = {"tested": [{"build": "b11642", "layout": "v2", "published": "2026-05-01"}, {"build": "b11284", "layout": "v1"}]}


@pytest.mark.parametrize(("value", "by", "layout"), [
    pytest.param("b11642", "tested", "v2", id="the-newest-tested"),
    pytest.param("b11284", "tested", "v1", id="an-older-tested"),
    pytest.param("b11643", None, None, id="a-build-not-tested"),
    pytest.param("b1164", None, None, id="a-prefix-is-not-the-build"),
])
def test_judge_is_membership_of_the_parts_tested_builds(value: str, by: str | None, layout: str | None) -> None:
    row = LLAMACPP.judge(PART, "build", value, None, "superfluid 1.0")
    assert (row["by"], row["layout"]) == (by, layout)


def test_judge_reads_the_releases_part_not_ours() -> None:
    part = {"tested": [{"build": "b99999", "layout": "v2"}]}
    assert LLAMACPP.judge(part, "build", "b99999", None, "superfluid 9.0")["by"] == "tested"
    assert LLAMACPP.judge(part, "build", "b11642", None, "superfluid 9.0")["by"] is None


def test_named_drives_cell_and_shown() -> None:
    assert list(LLAMACPP.named(PART)) == [("build", "b11642"), ("build", "b11284")]
    assert LLAMACPP.drives_cell(PART) == "b11642, b11284"
    shown = LLAMACPP.shown(PART)
    assert shown.header == ("BUILD", "LAYOUT", "PUBLISHED")
    assert shown.rows == (("b11642", "v2", "2026-05-01"), ("b11284", "v1", "-"))


@pytest.mark.parametrize(("row", "note"), [
    pytest.param({"layout": "v2", "published": "2026-05-01"}, "layout v2, published 2026-05-01", id="published"),
    pytest.param({"layout": "v1"}, "layout v1", id="layout-alone"),
    pytest.param({}, "", id="no-layout"),
])
def test_version_note(row: dict[str, Any], note: str) -> None:
    assert LLAMACPP.version_note(row) == note


def test_the_build_question_and_the_registry() -> None:
    build = LLAMACPP.question("build")
    assert build is not None and build.usable("b11642") and not build.usable("11642") and not build.usable("b0")
    assert registry.presentation("llamacpp") is LLAMACPP and LLAMACPP.column == "llama.cpp builds"
    assert LLAMACPP.abi_words(2) is None and [f.option for f in LLAMACPP.serve_flags] == ["lib", "parallel"]
