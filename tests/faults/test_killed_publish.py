"""A publish, a repair and a mirror sync killed by SIGKILL at each of their renames, links and
removals (issue 36, item 2): ``strace`` injects the signal into the real console script at the N-th
such system call, for every N until the command completes. The next command that takes the runtime's
lock finishes (or undoes) what was begun: ``current`` ends on the new install, and no
``.current-new-*`` link, ``.staging-*`` folder or temp file of the dead writer is left."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests import cli
from tests.copied_home import copy_home
from tests.faults.conftest import Home

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace (scripts/system-tools) is needed")

#: the most syscalls of one kind a command makes before it completes (a bound: the loop stops early)
MOST = 60
LEFTOVERS = (".current-new-", ".staging-", ".old-", ".removing-", ".pinned-new-")


def _killed_at(home: Home, syscalls: str, n: int, *argv: str) -> bool:
    """``superfluid <argv>`` with SIGKILL injected at its ``n``-th call of one of ``syscalls``;
    answers whether it was killed (False: it made fewer such calls and completed)."""
    done = cli.run("superfluid", *argv, env=home.env, timeout=60,
                   prefix=["strace", "-qq", "-o", "/dev/null", "-e", f"trace={syscalls}",
                           "-e", f"inject={syscalls}:signal=KILL:when={n}", "--"])
    if done.code == 0:
        return False
    assert done.code in (-9, 137), (done.code, done.stderr[-2000:])
    return True


def _leftovers(home: Home) -> list[str]:
    return sorted(n for n in os.listdir(home.basert) if n.startswith(LEFTOVERS))


@pytest.mark.slow
@pytest.mark.parametrize("then", ["install", "use"])
@pytest.mark.parametrize("syscalls", ["symlink", "rename,renameat2"], ids=["links", "renames"])
def test_an_install_killed_at_each_step_of_its_publish_is_finished_by_the_next_command(
        installed_home: Home, tmp_path: Path, syscalls: str, then: str) -> None:
    """``then``: the next command, the same install again (it finds the install there and says so) or
    ``runtime use basert --auto`` (which finds the default anew)."""
    assert installed_home.sf("runtime", "remove", "basert", "0.4.0-cpu").code == 0
    template = tmp_path / "before"
    shutil.copytree(installed_home.path, template, symlinks=True)
    install = ["runtime", "install", "basert", "--mirror", str(installed_home.mirror), "--version", "0.4.0"]
    killed = 0
    for n in range(1, MOST + 1):
        shutil.rmtree(installed_home.path)
        copy_home(template, installed_home.path)
        if not _killed_at(installed_home, syscalls, n, *install):
            break
        killed += 1
        if then == "use" and not (installed_home.basert / "0.4.0-cpu").is_dir():
            continue  # killed before the install was in place: nothing for `use` to find
        again = installed_home.sf(*install) if then == "install" else installed_home.sf("runtime", "use", "basert",
                                                                                            "--auto")
        assert again.code == 0, (n, again.stderr)
        assert installed_home.current() == "0.4.0-cpu", (n, syscalls, os.listdir(installed_home.basert))
        assert _leftovers(installed_home) == [], (n, syscalls)
    else:
        pytest.fail(f"the install still made a {syscalls} call after {MOST}")
    assert killed >= 1  # the install made at least one such call: the loop tested something


@pytest.mark.slow
@pytest.mark.parametrize("refetch", [False, True], ids=["from-cache", "refetched"])
def test_a_repair_killed_at_each_removal_leaves_nothing_behind_after_the_next_command(
        installed_home: Home, tmp_path: Path, refetch: bool) -> None:
    lib = installed_home.basert / "0.4.0-cpu" / "lib" / "libbaseRT.so"
    data = bytearray(lib.read_bytes())
    data[-1] ^= 0xFF
    lib.write_bytes(bytes(data))
    if refetch:
        shutil.rmtree(installed_home.path / "cache")
    template = tmp_path / "before"
    shutil.copytree(installed_home.path, template, symlinks=True)
    repair = ["runtime", "repair", "basert", "0.4.0-cpu", "--mirror", str(installed_home.mirror)]
    killed = 0
    for n in range(1, MOST + 1):
        shutil.rmtree(installed_home.path)
        copy_home(template, installed_home.path)
        if not _killed_at(installed_home, "unlink,unlinkat,rmdir", n, *repair):
            break
        killed += 1
        again = installed_home.sf(*repair)
        assert again.code == 0, (n, again.stderr)
        assert _leftovers(installed_home) == [], (n, refetch)
        assert installed_home.current() == "0.4.0-cpu"
    else:
        pytest.fail(f"the repair still removed something after {MOST} calls")
    assert killed >= 1


@pytest.mark.slow
def test_a_mirror_sync_killed_at_each_rename_leaves_no_temp_file_after_the_next_sync(
        installed_home: Home, tmp_path: Path) -> None:
    lock = tmp_path / "superfluid.lock"
    made = installed_home.sf("lock", "--runtime", "basert", "--platform", "linux-x64", "--mirror",
                             str(installed_home.mirror), "-o", str(lock))
    assert made.code == 0, made.stderr
    out = tmp_path / "synced"
    killed = 0
    for n in range(1, MOST + 1):
        shutil.rmtree(out, ignore_errors=True)
        if not _killed_at(installed_home, "rename,renameat2", n, "mirror", "sync", str(out), "--lock", str(lock)):
            break
        killed += 1
        again = installed_home.sf("mirror", "sync", str(out), "--lock", str(lock))
        assert again.code == 0, (n, again.stderr)
        temps = [str(p) for p in out.rglob("*.tmp")]
        assert temps == [], (n, temps)
    else:
        pytest.fail(f"the sync still renamed after {MOST} calls")
    assert killed >= 1
