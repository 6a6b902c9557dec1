"""``runtime/atomic.write_atomic``: a reader sees the old bytes or the new, never a part; the temp
file beside the target never lingers, whatever fails."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from superfluid.runtime.kernel.atomic import write_atomic


def _names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
def test_writes_a_new_file_whole_with_its_mode(tmp_path: Path, durable: bool) -> None:
    target = tmp_path / "answers.json"
    write_atomic(target, b"{}\n", mode=0o600, durable=durable)
    assert target.read_bytes() == b"{}\n" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["answers.json"]


def test_replaces_an_existing_file_and_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "receipt"
    target.write_bytes(b"old, and longer than the new")
    target.chmod(0o600)
    inode = target.stat().st_ino
    write_atomic(str(target), b"new")
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.stat().st_ino != inode  # a new file renamed over the old: never rewritten in place
    assert _names(tmp_path) == ["receipt"]


def test_replaces_a_link_not_what_it_points_to(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    link = tmp_path / "link"
    link.symlink_to(outside)
    write_atomic(link, b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert outside.read_bytes() == b"precious"


def test_a_failed_replace_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a-directory"
    target.mkdir()
    (target / "inside").write_bytes(b"kept")
    with pytest.raises(OSError):
        write_atomic(target, b"new")  # os.replace cannot put a file over a directory
    assert _names(tmp_path) == ["a-directory"] and (target / "inside").read_bytes() == b"kept"


def test_an_interrupted_write_leaves_the_old_file_and_no_temp(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "lock.toml"
    target.write_bytes(b"old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, b"new", durable=True)
    assert target.read_bytes() == b"old" and _names(tmp_path) == ["lock.toml"]


def test_a_directory_it_cannot_write_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "file", b"x")
