"""``exchange.exchanges_in``: the filesystem of a folder asked whether it swaps two names atomically,
with two empty folders made and removed (``doctor``'s ``filesystem`` problem, issue 44, item 6)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from superfluid.installer.home.exchange import exchange, exchanges_in


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_a_local_filesystem_swaps_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "install").mkdir()
    assert exchanges_in(str(tmp_path)) is True
    assert os.listdir(tmp_path) == ["install"]


def test_a_folder_that_cannot_be_written_is_not_known(tmp_path: Path) -> None:
    assert exchanges_in(str(tmp_path / "missing")) is None
    (tmp_path / "file").write_text("")
    assert exchanges_in(str(tmp_path / "file")) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_exchange_swaps_two_names(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").mkdir()
    assert exchange(str(tmp_path / "a"), str(tmp_path / "b")) is True
    assert (tmp_path / "a").is_dir() and (tmp_path / "b").read_text() == "a"
    with pytest.raises(FileNotFoundError):
        exchange(str(tmp_path / "a"), str(tmp_path / "gone"))
