"""``runtime gc`` killed between its steps (issue 22): the same kill matrix as ``remove``'s
(test_killed_steps.py). The collector is a real process stopped at a step (it waits there) and
killed with SIGKILL: every prefix leaves ``current`` naming an install whose receipt reads, and the
next ``runtime gc`` finishes what was begun, leaving nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.conftest import Home
from tests.faults.test_killed_steps import GATES, _consistent, _wait_for

COLLECTOR = GATES + ("from superfluid.installer.home import gc\n"
                     "from superfluid.runtime.hostfacts.system import host_platform\n"
                     'gc.collect(sys.argv[1], "basert", keep=1, platform=host_platform({}))\n')


#: (how the home is set up before the collection, the steps at which it is killed)
SETUPS = {
    "unpinned": ["renamed-aside", "before-delete"],  # current 0.4.0-cpu: 0.3.0-cpu and 0.3.1-cpu go
    "pinned": ["renamed-aside", "before-delete"],  # 0.3.1-cpu pinned: 0.3.0-cpu goes
    "current-moves": ["new-link-made", "renamed-aside", "before-delete"],  # current at 0.3.1-cpu, unpinned
}
MATRIX = [pytest.param(setup, step, id=f"{setup}-{step}") for setup, steps in SETUPS.items() for step in steps]


@pytest.mark.parametrize(("setup", "step"), MATRIX)
def test_a_gc_killed_at_any_step_leaves_a_consistent_home(installed_home: Home, tmp_path: Path, setup: str,
                                                          step: str) -> None:
    run = installed_home.sf("runtime", "install", "basert", "--mirror", str(installed_home.mirror),
                            "--version", "0.3.0")
    assert run.code == 0, run.stderr
    if setup == "pinned":
        assert installed_home.sf("runtime", "use", "basert", "0.3.1-cpu").code == 0
    if setup == "current-moves":  # a `current` left on an older install (by hand, or another tool)
        os.symlink("0.3.1-cpu", installed_home.basert / ".current-by-hand")
        os.replace(installed_home.basert / ".current-by-hand", installed_home.basert / "current")
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", COLLECTOR, str(installed_home.path), step, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=installed_home.env)
    assert _wait_for(marker, proc).endswith(step)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _consistent(installed_home) in ("0.3.1-cpu", "0.4.0-cpu")  # whatever the step: consistent
    # the next collection finishes what was begun
    run = installed_home.sf("runtime", "gc", "basert", "--keep", "1")
    assert run.code == 0, run.stderr
    left = _consistent(installed_home)
    installs = sorted(n for n in os.listdir(installed_home.basert)
                      if not n.startswith(".") and n not in ("current", "pinned"))
    assert "0.3.0-cpu" not in installs and "0.4.0-cpu" in installs and left in installs
    if setup == "pinned":
        assert installs == ["0.3.1-cpu", "0.4.0-cpu"] and left == "0.3.1-cpu"
    if setup == "unpinned":
        assert installs == ["0.4.0-cpu"]
    extra = ["pinned"] if (installed_home.basert / "pinned").exists() else []
    assert sorted(os.listdir(installed_home.basert)) == sorted([".install.lock", "current", *installs, *extra])
    assert installed_home.sf("runtime", "verify", "basert").code == 0
