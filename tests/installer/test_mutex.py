"""``installer/flock``: the install lock across processes (a real holder in a subprocess), who holds
it as its record says, and the lock file never written through a link or into anything but a
regular file of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from superfluid.installer import mutex as flock
from superfluid.installer.mutex import MutexBusy, MutexError, MutexOwner, install_mutex, mutex_owner
from superfluid.runtime.kernel.layout import LOCK
from tests.installer.staged import RID

HOLDER = textwrap.dedent("""
    import sys, time
    from superfluid.installer.mutex import install_mutex
    with install_mutex(sys.argv[1], command="superfluid runtime install demo"):
        print("held", flush=True)
        time.sleep(60)
""")


def test_waiter_names_the_holder_and_times_out(tmp_path: Path) -> None:
    root = tmp_path / "runtimes" / RID
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        seen: list[MutexOwner] = []
        started = time.monotonic()
        with pytest.raises(MutexBusy) as info:
            with install_mutex(root, timeout=0.5, on_wait=seen.append):
                pass
        assert time.monotonic() - started >= 0.5
        assert seen and seen[0].pid == holder.pid
        message = str(info.value)
        assert f"pid {holder.pid} (superfluid runtime install demo), since 20" in message
        assert f"kill {holder.pid}" in message and ".install.lock" in message
        busy = mutex_owner(root)
        assert busy is not None and busy.pid == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert mutex_owner(root) is None  # the kernel let go with the process
    with install_mutex(root, timeout=0) as me:
        assert me.pid == os.getpid()
        assert json.loads((root / ".install.lock").read_text())["pid"] == os.getpid()


def test_lock_is_exclusive_within_one_process(tmp_path: Path) -> None:
    with install_mutex(tmp_path):
        with pytest.raises(MutexBusy):
            with install_mutex(tmp_path, timeout=0.05):
                pass


def test_holder_command_hides_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/bin/superfluid", "runtime", "install", "basert", "--mirror",
                                      "https://user:secret@mirror.example/x"])
    from superfluid.installer import mutex as lock

    assert lock._command() == "superfluid runtime install basert --mirror <url>"


# --- the holder's record ----------------------------------------------------------------------------

@pytest.mark.parametrize(("holder", "words"), [
    pytest.param(MutexOwner(42, "superfluid runtime install basert", "2026-01-31T12:00:00Z"),
                 "pid 42 (superfluid runtime install basert), since 2026-01-31T12:00:00Z", id="all-known"),
    pytest.param(MutexOwner(42, "", ""), "pid 42", id="pid-alone"),
    pytest.param(MutexOwner(None, "x", ""), "another process (x)", id="no-pid"),
    pytest.param(MutexOwner(None, "", ""), "another process", id="nothing-known"),
])
def test_holder_describe(holder: MutexOwner, words: str) -> None:
    assert holder.describe() == words


@pytest.mark.parametrize(("record", "holder"), [
    pytest.param(b"", MutexOwner(None, "", ""), id="empty"),
    pytest.param(b"  \n", MutexOwner(None, "", ""), id="blank"),
    pytest.param(b'{"pid": 7, "command": "c", "started": "s"}', MutexOwner(7, "c", "s"), id="whole"),
    pytest.param(b'{"pid": 0}', MutexOwner(None, "", ""), id="pid-zero"),
    pytest.param(b'{"pid": -3}', MutexOwner(None, "", ""), id="pid-negative"),
    pytest.param(b'{"pid": true}', MutexOwner(None, "", ""), id="pid-bool"),
    pytest.param(b'{"pid": "7"}', MutexOwner(None, "", ""), id="pid-text"),
    pytest.param(b'{"pid": 7.0}', MutexOwner(None, "", ""), id="pid-float"),
    pytest.param(b'[7]', MutexOwner(None, "", ""), id="not-an-object"),
    pytest.param(b'{"pid": 7', MutexOwner(None, "", ""), id="cut-short"),
    pytest.param(b'{"pid": {"a": {"b": 1}}}', MutexOwner(None, "", ""), id="too-deep"),
    pytest.param(b'{"pid": 7, "command": null, "started": 5}', MutexOwner(7, "", "5"), id="odd-fields"),
    pytest.param(b'{"pid": 7, "command": "' + b"x" * 300 + b'"}', MutexOwner(7, "x" * 200, ""), id="long-command-cut"),
    pytest.param(b"\xff\xfe", MutexOwner(None, "", ""), id="not-utf8"),
])
def test_a_record_is_read_defensively(tmp_path: Path, record: bytes, holder: MutexOwner) -> None:
    """What another process left in the lock file names it at best, and never raises."""
    path = tmp_path / "record"
    path.write_bytes(record)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert flock._read_holder(fd) == holder
    finally:
        os.close(fd)


def test_the_record_names_this_process_while_held_and_is_emptied_after(tmp_path: Path) -> None:
    (tmp_path / LOCK).write_text(json.dumps({"pid": 1, "command": "a dead holder's long record" * 10}))
    with install_mutex(tmp_path, command="superfluid runtime install demo") as me:
        record = json.loads((tmp_path / LOCK).read_text())  # the old record is cut, not appended to
        assert record == {"pid": os.getpid(), "command": "superfluid runtime install demo", "started": me.started}
        assert me.started.endswith("Z") and len(me.started) == 20
    assert (tmp_path / LOCK).read_text() == ""
    assert mutex_owner(tmp_path) is None


def test_another_lock_name_in_the_same_folder_is_another_lock(tmp_path: Path) -> None:
    with install_mutex(tmp_path), install_mutex(tmp_path, name="prune.lock", timeout=0):
        assert sorted(os.listdir(tmp_path)) == [LOCK, "prune.lock"]


# --- where the lock file may be --------------------------------------------------------------------

@pytest.mark.parametrize("plant", [
    pytest.param(lambda p, t: os.symlink(t / "elsewhere", p), id="symlink-to-nothing"),
    pytest.param(lambda p, t: ((t / "target").write_text(""), os.symlink(t / "target", p)), id="symlink-to-a-file"),
    pytest.param(lambda p, t: os.mkfifo(p), id="fifo"),
    pytest.param(lambda p, t: os.mkdir(p), id="directory"),
    pytest.param(lambda p, t: ((t / "other").write_text(""), os.link(t / "other", p)), id="hard-link"),
])
def test_a_planted_lock_file_is_refused_and_not_written(tmp_path: Path, plant: object) -> None:
    root = tmp_path / "root"
    root.mkdir()
    path = root / LOCK
    plant(path, tmp_path)  # type: ignore[operator]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(MutexError) as e:
        with install_mutex(root, timeout=0):
            pytest.fail("held a planted lock")
    assert str(path) in str(e.value) and e.value.advice is not None
    assert sorted(os.listdir(tmp_path)) == before
    for name in ("target", "other"):
        if (tmp_path / name).exists():
            assert (tmp_path / name).read_text() == ""  # nothing written through it
    assert not (tmp_path / "elsewhere").exists()


def test_a_root_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(MutexError, match="cannot make"):
        with install_mutex(tmp_path / "file" / "runtimes"):
            pass


@pytest.mark.parametrize("plant", [
    pytest.param(lambda p: None, id="absent"),
    pytest.param(lambda p: p.write_text(json.dumps({"pid": 7})), id="a-free-file-with-a-record"),
    pytest.param(lambda p: os.symlink("/nonexistent", p), id="a-symlink"),
    pytest.param(lambda p: os.mkfifo(p), id="a-fifo"),
])
def test_nobody_holds_a_lock_that_no_process_holds(tmp_path: Path, plant: object) -> None:
    plant(tmp_path / LOCK)  # type: ignore[operator]
    assert mutex_owner(tmp_path) is None



BRIEF = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, and no record written yet (as between a holder's flock and its record)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    os.close(fd)
""")


@pytest.mark.parametrize("hold", [0.3, 3.0], ids=["lets-go-before-its-record", "never-writes-one"])
def test_a_waiter_names_nobody_it_did_not_wait_for(tmp_path: Path, hold: float) -> None:
    """Issue 36, item 6: a holder that lets go before its record is read is not named "another
    process": the lock is taken and nobody is reported; one that holds on with no record past the
    waiter's patience (2 s) is reported as unknown, once."""
    root = tmp_path / "runtimes" / RID
    root.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", BRIEF, str(root / LOCK), str(hold)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        seen: list[MutexOwner] = []
        with install_mutex(root, timeout=10, on_wait=seen.append) as me:
            assert me.pid == os.getpid()
        if hold < 2.0:
            assert seen == []
        else:
            assert len(seen) == 1 and seen[0].pid is None
    finally:
        holder.kill()
        holder.wait()
