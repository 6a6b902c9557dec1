"""The home layout (installer/home/store.py): names, ranking, current and pinned, remove, stale leftovers;
then real processes: two installs at once, and SIGKILL at each step. How one install lands is
tests/installer/home/test_publish.py, the install lock tests/installer/test_mutex.py.
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

from superfluid.installer.home import store
from superfluid.installer.home.installs import (
    current_install,
    list_installs,
    read_pinned,
)
from superfluid.installer.home.publish import install_staged
from superfluid.installer.home.store import NoSuchInstall, StoreError, clean_stale, pin, remove, unpin
from superfluid.installer.mutex import install_mutex, mutex_owner
from superfluid.runtime.kernel.receipt import Receipt, read_receipt
from tests.installer.archives import snapshot
from tests.installer.staged import RID, do_install, leftovers, no_probe, populating, receipt, root_of


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


# --- default, pin, remove ---------------------------------------------------------------------------

def test_default_is_pinned_else_best_ranked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = root_of(home)
    do_install(home, "0.4.0-cpu")
    assert current_install(root) == "0.4.0-cpu"
    do_install(home, "0.4.0-cuda-12.4")
    assert current_install(root) == "0.4.0-cuda-12.4"  # cuda ranks before cpu
    do_install(home, "0.5.0-cpu")
    assert current_install(root) == "0.4.0-cuda-12.4"  # a newer cpu does not beat cuda
    assert pin(home, RID, "0.4.0-cpu") == "0.4.0-cpu"
    assert read_pinned(root) == "0.4.0-cpu" and current_install(root) == "0.4.0-cpu"
    do_install(home, "0.6.0-cuda-12.4")
    assert current_install(root) == "0.4.0-cpu"  # the pin holds through installs
    assert unpin(home, RID) == "0.6.0-cuda-12.4"
    assert read_pinned(root) is None
    assert [i.name for i in list_installs(root)] == ["0.6.0-cuda-12.4", "0.4.0-cuda-12.4", "0.5.0-cpu", "0.4.0-cpu"]


def test_a_tested_install_outranks_a_newer_untested_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = root_of(home)
    install_staged(home, RID, "0.5.0-cpu", lambda s: receipt("0.5.0-cpu", tested=False, chosen_by="untested"),
                   no_probe)
    assert current_install(root) == "0.5.0-cpu"  # the only one: what was asked for
    do_install(home, "0.4.0-cpu")
    assert current_install(root) == "0.4.0-cpu"
    assert [i.name for i in list_installs(root)] == ["0.4.0-cpu", "0.5.0-cpu"]


def test_pin_unknown_install(tmp_path: Path) -> None:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu")
    with pytest.raises(NoSuchInstall, match=r"demo has no install 2.0-cpu \(installed: 1.0-cpu\)"):
        pin(home, RID, "2.0-cpu")


def test_remove_one_then_all(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = root_of(home)
    for name in ("1.0-cpu", "2.0-cpu", "1.0-vulkan"):
        do_install(home, name)
    pin(home, RID, "2.0-cpu")
    assert remove(home, RID, "2.0-cpu") == (["2.0-cpu"], "1.0-vulkan")
    assert read_pinned(root) is None  # the pin went with its install
    assert current_install(root) == "1.0-vulkan"
    with pytest.raises(NoSuchInstall, match=r"no install 2.0-cpu \(installed: 1.0-vulkan, 1.0-cpu\)"):
        remove(home, RID, "2.0-cpu")
    names, left = remove(home, RID)
    assert sorted(names) == ["1.0-cpu", "1.0-vulkan"] and left is None
    assert os.listdir(root) == [".install.lock"]
    with pytest.raises(NoSuchInstall, match="demo is not installed"):
        remove(home, RID)
    with pytest.raises(NoSuchInstall, match="demo is not installed"):
        unpin(home, RID)


def test_clean_stale(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = root_of(home)
    do_install(home, "2.0-cpu")
    dead, live = dead_pid(), os.getppid()
    rand = "0123456789abcdef"
    (root / f".staging-2.0-cpu-{dead}-{rand}" / "lib").mkdir(parents=True)
    (root / f".staging-b11284-cuda-13.4-{dead}-{rand}").mkdir()
    (root / f".old-1.0-cpu-{dead}-{rand}").mkdir()  # killed mid-replacement: 1.0-cpu is missing
    (root / f".old-1.0-cpu-{dead}-{rand}" / "runtime.json").write_text(json.dumps(receipt("1.0-cpu").to_json()))
    (root / f".old-2.0-cpu-{dead}-{rand}").mkdir()  # 2.0-cpu exists: this one is garbage
    (root / f".removing-3.0-cpu-{dead}-{rand}").mkdir()
    os.symlink("2.0-cpu", root / f".current-new-{dead}-{rand}")
    (root / ".staging-18446744073709551615").mkdir()  # the daemon's own name
    (root / f".staging-2.0-cpu-{live}-{rand}").mkdir()  # a live writer's (another namespace): kept
    (root / ".unrelated").mkdir()
    with install_mutex(root):
        done = clean_stale(root)
    assert len(done) == 7
    assert sorted(os.listdir(root)) == sorted([".install.lock", ".unrelated", f".staging-2.0-cpu-{live}-{rand}",
                                               "1.0-cpu", "2.0-cpu", "current"])
    assert read_receipt(root / "1.0-cpu" / "runtime.json").install == "1.0-cpu"


# --- real processes: concurrency and SIGKILL ------------------------------------------------------------------

INSTALLER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from superfluid.installer.home import store
    from superfluid.installer.home.publish import install_staged
    from superfluid.runtime.kernel.layout import worker_path
    from superfluid.runtime.kernel.receipt import Receipt, Source

    home, install, tag, mode, marker = sys.argv[1:6]

    def put(path, text):  # whole or not at all: the test polls for the file
        Path(path + ".tmp").write_text(text)
        os.replace(path + ".tmp", path)

    def block(why):
        put(marker, f"{os.getpid()} {why}")
        gate = Path(marker + ".go")
        while not gate.exists():
            time.sleep(0.01)

    def populate(staging):
        for i in range(20):
            (staging / "lib" / f"part{i}").write_text(tag)
        if mode in ("populate", "gate"):
            block("populate")
        return Receipt(id="demo", install=install, version=install.split("-")[0], backend=install.split("-", 1)[1],
                       worker=worker_path("demo"), sources=(Source("file:///" + tag, "0" * 64),), tested=True)

    def probe(staging):
        if mode == "probe":
            block("probe")
        assert all((staging / "lib" / f"part{i}").read_text() == tag for i in range(20))

    if mode == "between-renames":
        store._exchange = lambda a, b: False
        real_rename = os.rename
        def rename(src, dst):
            real_rename(src, dst)
            if os.path.basename(str(dst)).startswith(".old-"):
                block("between renames")
        os.rename = rename
    if mode == "after-exchange":
        real_remove = store.remove_tree
        def remove_tree(path):
            if os.path.basename(str(path)).startswith(".staging-"):
                block("after exchange")
            real_remove(path)
        store.remove_tree = remove_tree
        import superfluid.installer.home.publish as publish
        publish.remove_tree = remove_tree

    def on_wait(holder):
        put(marker + ".waited", str(holder.pid))

    p = install_staged(Path(home), "demo", install, populate, probe, on_wait=on_wait, lock_timeout=60,
                       command="test installer " + tag)
    print(json.dumps({"current": p.current, "replaced": p.replaced, "cleaned": list(p.cleaned)}))
""")


def start(tmp_path: Path, home: Path, install: str, tag: str, mode: str) -> tuple[subprocess.Popen[str], Path]:
    marker = tmp_path / f"marker-{tag}"
    proc = subprocess.Popen([sys.executable, "-c", INSTALLER, str(home), install, tag, mode, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, marker


def wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 30) -> str:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the installer exited {proc.returncode} early: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path} never appeared")
        time.sleep(0.01)
    return path.read_text()


def finish(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out)  # type: ignore[no-any-return]


def assert_consistent(home: Path) -> Receipt:
    """current points at a complete install whose files all come from the writer its receipt names."""
    root = root_of(home)
    got = read_receipt(root / "current" / "runtime.json")
    tag = got.sources[0].url.removeprefix("file:///")
    lib = root / "current" / "lib"
    assert sorted(os.listdir(lib)) == sorted(f"part{i}" for i in range(20))
    assert {p.read_text() for p in lib.iterdir()} == {tag}
    assert os.access(root / "current" / got.worker, os.X_OK)
    return got


def test_second_installer_waits_then_replaces(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, first_marker = start(tmp_path, home, "1.0-cpu", "first", "gate")
    wait_for(first_marker, first)
    second, second_marker = start(tmp_path, home, "1.0-cpu", "second", "plain")
    assert wait_for(Path(f"{second_marker}.waited"), second) == str(first.pid)  # it said whom it waits for
    Path(f"{first_marker}.go").write_text("")
    a, b = finish(first), finish(second)
    assert (a["replaced"], b["replaced"]) == (False, True)
    assert assert_consistent(home).sources[0].url == "file:///second"
    assert leftovers(home) == []


def test_racing_installers_end_consistent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    procs = [start(tmp_path, home, name, f"w{i}", "plain")[0]
             for i, name in enumerate(["1.0-cpu", "1.0-cpu", "1.0-cpu", "2.0-cpu"])]
    for proc in procs:
        finish(proc)
    assert assert_consistent(home).install == "2.0-cpu"
    assert sorted(i.name for i in list_installs(root_of(home))) == ["1.0-cpu", "2.0-cpu"]
    one = root_of(home) / "1.0-cpu"
    tag = read_receipt(one / "runtime.json").sources[0].url.removeprefix("file:///")
    assert {p.read_text() for p in (one / "lib").iterdir()} == {tag}
    assert leftovers(home) == []


@pytest.mark.parametrize("step", ["populate", "probe"])
def test_sigkill_before_publish_leaves_the_old_install_serving(tmp_path: Path, step: str) -> None:
    home = tmp_path / "home"
    proc, marker = start(tmp_path, home, "1.0-cpu", "old", "plain")
    finish(proc)
    before = snapshot(root_of(home) / "1.0-cpu")
    proc, marker = start(tmp_path, home, "1.0-cpu", "new", step)
    assert wait_for(marker, proc).endswith(step)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    root = root_of(home)
    assert current_install(root) == "1.0-cpu"
    assert snapshot(root / "1.0-cpu") == before
    assert assert_consistent(home).sources[0].url == "file:///old"
    stale = leftovers(home)
    assert len(stale) == 1 and stale[0].startswith(f".staging-1.0-cpu-{proc.pid}-")
    assert mutex_owner(root) is None
    published = install_staged(home, RID, "2.0-cpu", populating("2.0-cpu"), no_probe)  # the next run
    assert published.cleaned == (stale[0],)
    assert leftovers(home) == []
    assert snapshot(root / "1.0-cpu") == before


def test_sigkill_between_the_renames_is_put_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, _ = start(tmp_path, home, "1.0-cpu", "old", "plain")
    finish(proc)
    before = snapshot(root_of(home) / "1.0-cpu")
    proc, marker = start(tmp_path, home, "1.0-cpu", "new", "between-renames")
    wait_for(marker, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    root = root_of(home)
    assert not (root / "1.0-cpu").exists()  # the one window a filesystem without exchange has
    aside = [n for n in leftovers(home) if n.startswith(".old-1.0-cpu-")]
    assert len(aside) == 1 and snapshot(root / aside[0]) == before
    install_staged(home, RID, "2.0-cpu", populating("2.0-cpu"), no_probe)  # the next run puts it back
    assert snapshot(root / "1.0-cpu") == before
    assert leftovers(home) == []
    assert current_install(root) == "2.0-cpu"


def test_sigkill_after_the_exchange_keeps_the_new_install(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").write_text("")
    if not store._exchange(str(tmp_path / "a"), str(tmp_path / "b")):  # pragma: no cover
        pytest.skip("this filesystem has no atomic exchange; the rename path is tested above")
    home = tmp_path / "home"
    proc, _ = start(tmp_path, home, "1.0-cpu", "old", "plain")
    finish(proc)
    proc, marker = start(tmp_path, home, "1.0-cpu", "new", "after-exchange")
    wait_for(marker, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stale = leftovers(home)
    assert len(stale) == 1 and stale[0].startswith(".staging-1.0-cpu-")  # now holding the old files
    assert assert_consistent(home).sources[0].url == "file:///new"
    install_staged(home, RID, "2.0-cpu", populating("2.0-cpu"), no_probe)
    assert leftovers(home) == []


# --- pinned, written whole ---------------------------------------------------------------------------------

def test_pinned_goes_through_a_temp_name_clean_stale_knows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import superfluid.runtime.kernel.atomic as atomic

    home = tmp_path / "home"
    do_install(home, "1.0-cpu")
    do_install(home, "2.0-cpu")
    root = root_of(home)
    pin(home, RID, "1.0-cpu")
    temps: list[str] = []

    def failing(src: str, dst: object) -> None:
        temps.append(os.path.basename(src))
        raise OSError(28, "No space left on device", src)

    monkeypatch.setattr(atomic.os, "replace", failing)
    with pytest.raises(StoreError, match="No space left"):
        pin(home, RID, "2.0-cpu")
    monkeypatch.undo()
    assert len(temps) == 1 and store._TEMP.fullmatch(temps[0]) and temps[0].startswith(".pinned-new-")
    assert leftovers(home) == []  # the temp file is removed, whatever failed
    assert read_pinned(root) == "1.0-cpu" and current_install(root) == "1.0-cpu"
