"""``installer/cachehold``: a process records the blobs it uses before it uses them; a prune sees the
records of live processes (their flock is held) and removes the others, whatever they are. Real
flocks across real processes; nothing is written through a link."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from superfluid.installer.cache import holds as cachehold
from superfluid.installer.cache.holds import HOLDS, PRUNE_LOCK, held_now, hold, linked, pruning
from superfluid.installer.mutex import MutexBusy

A, B, C = "a" * 64, "b" * 64, "c" * 64


@pytest.fixture
def cache_root(tmp_path: Path) -> Iterator[Path]:
    """A cache folder; this process's records in it are dropped afterwards (as at exit)."""
    root = tmp_path / "cache"
    yield root
    if str(root) in cachehold._records:
        cachehold._drop(str(root))


def records(root: Path) -> list[Path]:
    return sorted((root / HOLDS).iterdir()) if (root / HOLDS).is_dir() else []


HOLDER = textwrap.dedent("""
    import sys, time
    from superfluid.installer.cache.holds import hold
    assert hold(sys.argv[1], sys.argv[3:])
    open(sys.argv[2], "w").write("held")
    time.sleep(60)
""")


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts a process that holds the given digests in a cache and sleeps; killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []

    def start(root: Path, *digests: str) -> subprocess.Popen[bytes]:
        marker = tmp_path / f"held-{len(started)}"
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), str(marker), *digests])
        started.append(proc)
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


# --- where nothing is written ---------------------------------------------------------------------------

@pytest.mark.parametrize(("make", "which"), [
    pytest.param(lambda root, away: None, None, id="plain"),
    pytest.param(lambda root, away: os.symlink(away, root), "root", id="the-cache-is-a-link"),
    pytest.param(lambda root, away: (root.mkdir(), os.symlink(away, root / HOLDS)), "holds", id="holds-is-a-link"),
])
def test_linked(tmp_path: Path, make: Callable[[Path, Path], object], which: str | None) -> None:
    root, away = tmp_path / "cache", tmp_path / "away"
    away.mkdir()
    make(root, away)
    want = {None: None, "root": str(root), "holds": str(root / HOLDS)}[which]
    assert linked(root) == want
    if which is not None:
        assert hold(root, [A]) is False  # not recorded, nothing written through the link
        assert os.listdir(away) == []


def test_a_cache_that_cannot_be_written_holds_nothing_and_does_not_raise(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert hold(tmp_path / "file" / "cache", [A]) is False


# --- recording ------------------------------------------------------------------------------------------

def test_a_hold_is_recorded_under_a_flock_this_process_holds(cache_root: Path) -> None:
    assert hold(cache_root, [A, B, A]) is True
    (record,) = records(cache_root)
    assert record.name.startswith(f"{os.getpid()}-") and record.name.endswith(".lock")
    assert record.read_text() == f"{A}\n{B}\n"  # each digest once, in order
    fd = os.open(record, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert (cache_root / PRUNE_LOCK).is_file()


def test_holding_again_writes_only_what_is_new(cache_root: Path) -> None:
    assert hold(cache_root, [A]) and hold(cache_root, [A]) and hold(cache_root, []) and hold(cache_root, [B, A])
    (record,) = records(cache_root)
    assert record.read_text() == f"{A}\n{B}\n"


def test_this_process_sees_its_own_holds(cache_root: Path) -> None:
    hold(cache_root, [A, B])
    assert held_now(cache_root) == {A, B}


def test_nothing_held_in_a_fresh_cache(tmp_path: Path) -> None:
    assert held_now(tmp_path / "absent") == set()


# --- what another process holds ------------------------------------------------------------------------

def test_a_live_process_holds_until_it_dies(cache_root: Path, holder: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = holder(cache_root, A, B)
    assert held_now(cache_root) == {A, B}
    with pruning(cache_root) as held:
        assert held == {A, B}
    assert len(records(cache_root)) == 1  # kept: its process lives
    proc.kill()
    proc.wait()
    assert held_now(cache_root) == set()  # a dry look changes nothing ...
    assert len(records(cache_root)) == 1
    with pruning(cache_root) as held:  # ... a prune removes the dead record
        assert held == set()
    assert records(cache_root) == []


def test_two_processes_hold_the_union(cache_root: Path, holder: Callable[..., subprocess.Popen[bytes]]) -> None:
    holder(cache_root, A)
    holder(cache_root, B, C)
    hold(cache_root, [C])
    with pruning(cache_root) as held:
        assert held == {A, B, C}
    assert len(records(cache_root)) == 3


@pytest.mark.parametrize(("name", "make"), [
    pytest.param("dead.lock", lambda p: p.write_text(f"{A}\n"), id="a-dead-processes-record"),
    pytest.param("link.lock", lambda p: os.symlink("/etc/passwd", p), id="a-symlink"),
    pytest.param("fifo.lock", lambda p: os.mkfifo(p), id="a-fifo"),
    pytest.param("dir.lock", lambda p: p.mkdir(), id="a-directory"),
])
def test_what_no_live_process_holds_is_no_hold_and_a_prune_removes_it(cache_root: Path, name: str,
                                                                      make: Callable[[Path], object]) -> None:
    (cache_root / HOLDS).mkdir(parents=True)
    make(cache_root / HOLDS / name)
    assert held_now(cache_root) == set()
    with pruning(cache_root) as held:
        assert held == set()
    left = [p.name for p in records(cache_root)]
    assert left == (["dir.lock"] if name == "dir.lock" else [])  # unlink cannot remove a directory
    assert os.path.exists("/etc/passwd")


def test_only_whole_digests_are_read_from_a_record(cache_root: Path,
                                                   holder: Callable[..., subprocess.Popen[bytes]]) -> None:
    holder(cache_root, A, "short", "x" * 65, B[:63])
    assert held_now(cache_root) == {A}


# --- a prune excludes recording, and another prune --------------------------------------------------------

PRUNER = textwrap.dedent("""
    import sys, time
    from superfluid.installer.cache.holds import pruning
    with pruning(sys.argv[1]):
        open(sys.argv[2], "w").write("pruning")
        time.sleep(60)
""")


def test_while_a_prune_deletes_nothing_is_recorded_and_another_prune_waits(
        cache_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_root.mkdir()
    marker = tmp_path / "pruning"
    proc = subprocess.Popen([sys.executable, "-c", PRUNER, str(cache_root), str(marker)])
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        monkeypatch.setattr(cachehold, "_WAIT", 0.2)
        started = time.monotonic()
        assert hold(cache_root, [A]) is False  # gave up recording: the blob is not to be used from the cache
        assert time.monotonic() - started >= 0.2
        assert held_now(cache_root) == set()
        with pytest.raises(MutexBusy) as e:
            with pruning(cache_root, timeout=0.2):
                pass
        assert e.value.holder.pid == proc.pid and e.value.holder.command == "superfluid cache prune"
    finally:
        proc.kill()
        proc.wait()
    assert hold(cache_root, [A]) is True  # the prune is gone with its process
