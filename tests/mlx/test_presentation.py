"""``runtime/mlx/presentation``: how the manifest and the face show MLX: a tested mlx version on the
part's platforms asked as a manifest question, the versions it names, its cell, table and notes."""

from __future__ import annotations

import pytest

from superfluid.runtime import registry
from superfluid.runtime.mlx.presentation import PRESENTATION as MLX

PART = {"installs": [{"mlx": "0.32.2", "mlx_lm": "0.31.3", "python": "3.12"}], "platforms": ["macos-arm64"]}


@pytest.mark.parametrize(("value", "platform", "by"), [
    pytest.param("0.32.2", None, "tested", id="tested"),
    pytest.param("0.32.2", "macos-arm64", "tested", id="tested-on-its-platform"),
    pytest.param("0.32.2", "linux-x64", None, id="not-on-another-platform"),
    pytest.param("0.32.1", None, None, id="not-tested"),
    pytest.param("0.32", None, None, id="a-prefix-is-not-the-version"),
])
def test_judge(value: str, platform: str | None, by: str | None) -> None:
    assert MLX.judge(PART, "version", value, platform, "superfluid 1.0")["by"] == by


def test_named_drives_cell_shown_and_note() -> None:
    assert list(MLX.named(PART)) == [("version", "0.32.2")]
    assert MLX.drives_cell(PART) == "0.32.2 (macos-arm64)"
    shown = MLX.shown(PART)
    assert shown.line == "mlx: installs on macos-arm64" and shown.rows == (("0.32.2", "0.31.3", "3.12"),)
    assert MLX.version_note({"mlx_lm": "0.31.3", "python": "3.12"}) == "mlx-lm 0.31.3, Python 3.12"
    assert MLX.version_note({"mlx_lm": "0.31.3"}) == "mlx-lm 0.31.3, Python ?"
    assert MLX.version_note({}) == ""


def test_the_version_question_and_the_registry() -> None:
    assert [q.kind for q in MLX.questions] == ["version"] and MLX.column == "MLX" and not MLX.serve_flags
    assert registry.presentation("mlx") is MLX and MLX.requires_text({"abi": 1}) is None
