"""``installer/cache/records.py``: the cache's folders, never made or written through a link, and its own
small records, read within a bound."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from superfluid.installer.cache.records import (
    RECORD_MAX_BYTES,
    prepare,
    read_record,
    text_key,
    write_private,
)


def test_prepare_makes_the_three_folders(tmp_path: Path) -> None:
    prepare(tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["http", "partial", "sha256"]
    prepare(tmp_path / "cache")  # again: no error


@pytest.mark.parametrize("linked", ["", "sha256", "http", "partial"])
def test_prepare_refuses_a_link(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "cache"
    where = root / linked if linked else root
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError, match="is a symbolic link; superfluid writes nothing through a link"):
        prepare(root)
    assert list(outside.iterdir()) == []


def test_a_record_is_written_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_private(path, json.dumps({"url": "u"}).encode())
    assert read_record(path) == {"url": "u"} and stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: None, id="absent"),
    pytest.param(lambda p: p.write_text("{not json"), id="not-json"),
    pytest.param(lambda p: p.write_text(json.dumps("x" * RECORD_MAX_BYTES)), id="too-large"),
    pytest.param(lambda p: p.symlink_to(p.with_name("elsewhere")), id="a-link"),
])
def test_what_is_not_a_record_of_ours_is_none(tmp_path: Path, make: object) -> None:
    (tmp_path / "elsewhere").write_text("{}")
    path = tmp_path / "r.json"
    make(path)  # type: ignore[operator]
    assert read_record(path) is None


def test_text_key_is_the_sha256_of_the_text() -> None:
    assert text_key("https://x.test/y") == hashlib.sha256(b"https://x.test/y").hexdigest()
