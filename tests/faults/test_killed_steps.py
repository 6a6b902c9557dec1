"""A remove killed between its steps, and a waiter on the lock (issue 14, items 11, 12).

The remover is a real process stopped at a step (it waits on a gate file there) and killed with
SIGKILL: every prefix of a remove leaves ``current`` naming an install whose receipt reads, and the
next command finishes what was begun. A waiter that arrives between the holder's ``flock`` and
the holder writing its record still names the holder (pid and command).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Home

#: the start of a script that stops at ``step`` (its last two arguments: the step, and the marker
#: file it writes there) and waits to be killed; the script goes on with the change it makes
GATES = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from superfluid.installer.home import store

    step, marker = sys.argv[-2:]

    def block(why):
        Path(marker + ".tmp").write_text(f"{os.getpid()} {why}")
        os.replace(marker + ".tmp", marker)
        while True:
            time.sleep(1)

    real_symlink, real_rename = os.symlink, os.rename

    def symlink(src, dst, *a, **k):
        real_symlink(src, dst, *a, **k)
        if step == "new-link-made" and os.path.basename(str(dst)).startswith(".current-new-"):
            block(step)  # the new link exists, not yet renamed over `current`

    def rename(src, dst, *a, **k):
        real_rename(src, dst, *a, **k)
        if step == "renamed-aside" and os.path.basename(str(dst)).startswith(".removing-"):
            block(step)  # the install is renamed away, not yet deleted

    os.symlink, os.rename = symlink, rename
    if step == "before-delete":
        real_remove_tree = store.remove_tree
        def remove_tree(path):
            if os.path.basename(str(path)).startswith(".removing-"):
                block(step)
            real_remove_tree(path)
        store.remove_tree = remove_tree
""")
REMOVER = GATES + 'store.remove(Path(sys.argv[1]), "basert", sys.argv[2])\n'



def _wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 15) -> str:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the remover exited {proc.returncode} early: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path} never appeared")
        time.sleep(0.01)
    return path.read_text()


def _consistent(home: Home) -> str:
    """`current` names an install of the runtime whose receipt reads; answers its name."""
    row = next(r for r in home.sf("runtimes", "--json").json() if r["id"] == "basert")
    assert row["state"] == "ready", row
    name = home.current()
    assert name is not None and json.loads((home.basert / name / "runtime.json").read_text())["install"] == name
    return name


@pytest.mark.parametrize("step", ["new-link-made", "renamed-aside", "before-delete"])
@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
def test_a_remove_killed_at_any_step_leaves_a_consistent_home(installed_home: Home, tmp_path: Path, step: str,
                                                              pinned: bool) -> None:
    if pinned:
        assert installed_home.sf("runtime", "use", "basert", "0.4.0-cpu").code == 0
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", REMOVER, str(installed_home.path), "0.4.0-cpu", step, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=installed_home.env)
    assert _wait_for(marker, proc).endswith(step)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _consistent(installed_home) in ("0.3.1-cpu", "0.4.0-cpu")  # whatever the step: consistent
    # the next command finishes (or undoes) what was begun
    if (installed_home.basert / "0.4.0-cpu").exists():
        assert installed_home.sf("runtime", "remove", "basert", "0.4.0-cpu").code == 0
    else:
        assert installed_home.sf("runtime", "use", "basert", "--auto").code == 0
    assert _consistent(installed_home) == "0.3.1-cpu"
    assert sorted(os.listdir(installed_home.basert)) == [".install.lock", "0.3.1-cpu", "current"]


HOLDER = textwrap.dedent("""
    import fcntl, json, os, sys, time
    lock, marker, late = sys.argv[1], sys.argv[2], float(sys.argv[3])
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    open(marker, "w").close()
    time.sleep(late)  # a waiter arriving now finds the lock held and no record yet
    record = json.dumps({"pid": os.getpid(), "command": "holder of the test", "started": "2026-01-01T00:00:00Z"})
    os.pwrite(fd, (record + "\\n").encode(), 0)
    time.sleep(2.0)
    os.ftruncate(fd, 0)
""")


@pytest.mark.parametrize("late", [0.0, 0.8], ids=["record-written", "waiter-before-the-record"])
def test_a_waiter_names_the_holder(installed_home: Home, tmp_path: Path, late: float) -> None:
    marker = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(installed_home.basert / ".install.lock"), str(marker),
                               str(late)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        run = installed_home.sf("runtime", "use", "basert", "0.3.1-cpu")
        assert run.code == 0, run.stderr
        assert f"pid {holder.pid} (holder of the test" in run.stderr, run.stderr
        assert installed_home.current() == "0.3.1-cpu"
    finally:
        holder.kill()
        holder.wait()
