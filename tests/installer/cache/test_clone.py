"""``installer/cache/clone.py``: a file made at a new name with another's bytes (reflink, link or copy)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.installer.cache import clone
from superfluid.installer.cache.clone import clone_file


def test_a_clone_holds_the_same_bytes(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.write_bytes(os.urandom(100_000))
    how = clone_file(src, dest)
    assert how in ("reflink", "link", "copy") and dest.read_bytes() == src.read_bytes()
    src.unlink()  # the folder it came from moved: the clone stays
    assert dest.stat().st_size == 100_000


def test_without_reflink_nor_link_it_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.write_bytes(b"bytes")

    def no_link(*_a: object, **_k: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(clone, "_reflink", lambda _s, _d: False)
    monkeypatch.setattr(os, "link", no_link)
    assert clone_file(src, dest) == "copy" and dest.read_bytes() == b"bytes"
    assert os.stat(dest).st_ino != os.stat(src).st_ino


def test_nothing_is_left_when_none_can_be_made(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        clone_file(tmp_path / "missing", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
