"""``current`` put back (installer/home/current.py) and pointed (``store.point_current``): a link in its
place is replaced, a file or a directory is kept whole under a name no writer deletes, with the
kernel's atomic swap and without it; nothing is done while ``current`` names an install, nor when no
install reads (issue 44, item 3). The repair that calls it, through the real CLI, is
tests/faults/test_repair_current.py."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from superfluid.installer.home import store
from superfluid.installer.home.current import put_current_back
from superfluid.installer.home.installs import current_install
from superfluid.installer.home.store import clean_stale, pin
from superfluid.installer.mutex import install_mutex
from tests.installer.staged import RID, do_install, root_of


def _file(p: Path) -> None:
    p.write_text("mine\n")


def _dir(p: Path) -> None:
    p.mkdir()
    (p / "notes").write_text("mine\n")


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _kept(root: Path) -> list[Path]:
    return sorted(root.glob(".current-set-aside-*"))


@pytest.fixture
def demo_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu")
    do_install(home, "2.0-cpu")
    return home


@pytest.mark.parametrize("swap", [True, False], ids=["atomic-swap", "two-renames"])
@pytest.mark.parametrize("make", [_file, _dir, _fifo], ids=["regular-file", "directory", "fifo"])
def test_what_is_not_a_link_is_kept_whole(demo_home: Path, monkeypatch: pytest.MonkeyPatch, swap: bool,
                                          make: Callable[[Path], None]) -> None:
    root = root_of(demo_home)
    (root / "current").unlink()
    make(root / "current")
    inode = os.lstat(root / "current").st_ino
    if not swap:
        monkeypatch.setattr(store, "_exchange", lambda a, b: False)
    with install_mutex(root):
        kept = store.point_current(root, "1.0-cpu")
    assert os.readlink(root / "current") == "1.0-cpu"
    assert kept is not None and _kept(root) == [kept] and os.lstat(kept).st_ino == inode
    assert store._TEMP.fullmatch(kept.name) is None  # no writer ever deletes it
    with install_mutex(root):
        assert clean_stale(root) == []
    assert os.lstat(kept).st_ino == inode
    do_install(demo_home, "3.0-cpu")  # an install moves current on, and keeps what was kept
    assert current_install(root) == "3.0-cpu" and _kept(root) == [kept]


@pytest.mark.parametrize("target", ["/etc", "9.9.9-cpu", "current", "."])
def test_a_link_is_replaced_and_what_it_points_at_is_untouched(demo_home: Path, target: str) -> None:
    root = root_of(demo_home)
    (root / "current").unlink()
    os.symlink(target, root / "current")
    with install_mutex(root):
        assert store.point_current(root, "2.0-cpu") is None
    assert os.readlink(root / "current") == "2.0-cpu" and _kept(root) == []


def test_put_back_names_the_pin_else_the_best_ranked(demo_home: Path) -> None:
    root = root_of(demo_home)
    (root / "current").unlink()
    os.symlink("/etc", root / "current")
    done = put_current_back(RID, root)
    assert done is not None and (done.names, done.chosen, done.kept) == ("2.0-cpu", "best-ranked", None)
    assert "points outside" in done.was and current_install(root) == "2.0-cpu"
    pin(demo_home, RID, "1.0-cpu")
    (root / "current").unlink()
    done = put_current_back(RID, root)
    assert done is not None and (done.names, done.chosen) == ("1.0-cpu", "pinned")
    assert done.was == f"{root / 'current'} is missing"
    assert done.words().startswith(f"current of {RID} named no install ({root / 'current'} is missing); "
                                   "it now names 1.0-cpu, the pinned install")


def test_put_back_does_nothing_while_current_names_an_install(demo_home: Path) -> None:
    root = root_of(demo_home)
    pin(demo_home, RID, "1.0-cpu")
    os.unlink(root / "pinned")  # current names 1.0-cpu, not the best-ranked: it is no fault
    assert put_current_back(RID, root) is None and current_install(root) == "1.0-cpu"


def test_put_back_leaves_current_when_no_install_reads(demo_home: Path) -> None:
    root = root_of(demo_home)
    for name in ("1.0-cpu", "2.0-cpu"):
        (root / name / "runtime.json").write_text("not json")
    (root / "current").unlink()
    _dir(root / "current")
    assert put_current_back(RID, root) is None
    assert (root / "current" / "notes").read_text() == "mine\n" and _kept(root) == []


def test_put_back_of_a_runtime_never_installed_is_nothing(tmp_path: Path) -> None:
    assert put_current_back(RID, root_of(tmp_path / "home")) is None
    assert not root_of(tmp_path / "home").exists()
