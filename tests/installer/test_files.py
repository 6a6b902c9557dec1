"""``installer.files``: the one rule for opening a lock file (the install mutex, the cache's holds
and the partial downloads' locks all use it), and removing a tree without following links."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from superfluid.installer.cache.stores import Cache
from superfluid.installer.files import NotALockFile, open_lock_file, remove_tree


def _link(at: Path, outside: Path) -> None:
    os.symlink(outside, at)


def _fifo(at: Path, _outside: Path) -> None:
    os.mkfifo(at)


def _folder(at: Path, _outside: Path) -> None:
    at.mkdir()


def _hard_link(at: Path, outside: Path) -> None:
    os.link(outside, at)


def _dev_zero(at: Path, _outside: Path) -> None:
    os.symlink("/dev/zero", at)


PLANTED: list[tuple[Callable[[Path, Path], None], str]] = [
    (_link, "symbolic link"), (_dev_zero, "symbolic link"), (_fifo, "not a regular file"),
    (_folder, ""), (_hard_link, "other hard links")]


@pytest.mark.parametrize(("plant", "said"), PLANTED, ids=["link", "dev-zero", "fifo", "folder", "hard-link"])
def test_anything_but_a_regular_file_of_one_link_is_refused(tmp_path: Path, plant: Callable[[Path, Path], None],
                                                           said: str) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"not ours")
    at = tmp_path / "x.lock"
    plant(at, outside)
    with pytest.raises(OSError) as e:
        os.close(open_lock_file(at))
    if said:
        assert isinstance(e.value, NotALockFile) and said in str(e.value.strerror)
    assert outside.read_bytes() == b"not ours"


def test_a_regular_file_is_opened_blocking_and_close_on_exec(tmp_path: Path) -> None:
    fd = open_lock_file(tmp_path / "x.lock")
    try:
        assert os.get_blocking(fd) and not os.get_inheritable(fd)
        assert stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    with pytest.raises(FileExistsError):
        open_lock_file(tmp_path / "x.lock", os.O_RDWR | os.O_CREAT | os.O_EXCL)


def test_a_partial_downloads_lock_planted_as_a_hard_link_is_replaced_not_written(tmp_path: Path) -> None:
    """The partial's lock used to be opened whatever it was: a hard link to a file outside the cache
    was flocked and kept; now it is replaced by a fresh lock file, and the file outside is untouched."""
    cache = Cache(tmp_path / "cache")
    outside = tmp_path / "outside"
    outside.write_bytes(b"not ours")
    key = "ab" * 32
    cache.partials.folder.mkdir(parents=True, exist_ok=True)
    os.link(outside, cache.partials.folder / f"{key}.lock")
    with cache.partials.partial(key):
        assert os.stat(cache.partials.folder / f"{key}.lock").st_ino != os.stat(outside).st_ino
    assert outside.read_bytes() == b"not ours" and os.stat(outside).st_nlink == 1


def test_remove_tree_never_follows_a_link(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "file").write_bytes(b"x")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    os.symlink(kept, tree / "sub" / "link")
    (tree / "sub").chmod(0o500)  # a folder without owner write permission is still removed
    remove_tree(tree)
    remove_tree(tree)  # missing is fine
    assert not tree.exists() and (kept / "file").read_bytes() == b"x"
