"""``installer/publish``: one install lands by stage → probe → receipt → one rename, holding the
lock; what it refuses (names, receipts that describe another install, no receipt, no runnable
worker) and that a failure at any step leaves every install as it was; the worker launcher."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.installer.home import store
from superfluid.installer.home.installs import BadName
from superfluid.installer.home.publish import install_staged
from superfluid.installer.home.store import StoreError
from superfluid.installer.mutex import mutex_owner
from superfluid.installer.unpack.extract import extract_all
from superfluid.installer.unpack.rules import UnsafeArchive
from superfluid.runtime.kernel.errors import WorkerFailed
from superfluid.runtime.kernel.layout import worker_path
from superfluid.runtime.kernel.receipt import Receipt, read_receipt
from superfluid.runtime.kernel.record import FILES
from tests.installer.archives import E, make_tar, snapshot
from tests.installer.staged import RID, do_install, leftovers, no_probe, populating, receipt, root_of


def test_first_install_layout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    published = install_staged(home, RID, "1.0-cpu", populating("1.0-cpu"), no_probe)
    root = root_of(home)
    assert published.path == root / "1.0-cpu" and not published.replaced and published.current == "1.0-cpu"
    assert os.readlink(root / "current") == "1.0-cpu"  # relative
    written = read_receipt(root / "current" / "runtime.json")
    assert written == published.receipt
    assert written == receipt("1.0-cpu", installed_at=written.installed_at)
    assert written.installed_at and written.installed_at.endswith("Z")
    worker = root / "1.0-cpu" / "bin" / f"superfluid-worker-{RID}"
    assert os.access(worker, os.X_OK)
    assert sorted(os.listdir(root)) == [".install.lock", "1.0-cpu", "current"]
    assert (root / ".install.lock").read_text() == ""  # nobody holds it now


def test_reinstall_replaces_in_place(tmp_path: Path) -> None:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu", "old")
    (root_of(home) / "1.0-cpu" / "lib" / "stray").write_text("from the old install")
    published = install_staged(home, RID, "1.0-cpu", populating("1.0-cpu", "new"), no_probe)
    assert published.replaced
    lib = root_of(home) / "1.0-cpu" / "lib"
    assert sorted(os.listdir(lib)) == [f"part{i}" for i in range(5)]
    assert {p.read_text() for p in lib.iterdir()} == {"new"}
    assert leftovers(home) == []


def test_reinstall_without_atomic_exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu", "old")
    monkeypatch.setattr(store, "_exchange", lambda a, b: False)
    assert install_staged(home, RID, "1.0-cpu", populating("1.0-cpu", "new"), no_probe).replaced
    assert (root_of(home) / "1.0-cpu" / "lib" / "part0").read_text() == "new"
    assert leftovers(home) == []


@pytest.mark.parametrize("fail_in", ["populate", "probe"])
def test_failure_leaves_every_install_intact(tmp_path: Path, fail_in: str) -> None:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu", "old")
    before = snapshot(home)

    def populate(staging: Path) -> Receipt:
        (staging / "lib" / "part0").write_text("new")
        if fail_in == "populate":
            raise OSError(28, "No space left on device", str(staging / "lib" / "part0"))
        return receipt("1.0-cpu", "new")

    def probe(staging: Path) -> None:
        assert (staging / "runtime.json").is_file()  # the receipt is written before the probe
        raise WorkerFailed(str(staging / worker_path(RID)), "the staged library states ABI 2")

    error = StoreError if fail_in == "populate" else WorkerFailed
    with pytest.raises(error, match="No space left" if fail_in == "populate" else "ABI 2"):
        install_staged(home, RID, "1.0-cpu", populate, probe)
    assert snapshot(home) == before


def test_hostile_archive_installs_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu", "old")
    archive = make_tar(tmp_path / "evil.tar.gz", [E("file", "ok", "x"), E("symlink", "l", "../../../../outside")])
    before = snapshot(tmp_path)

    def populate(staging: Path) -> Receipt:
        extract_all([archive], staging / "lib")
        return receipt("2.0-cpu")

    with pytest.raises(UnsafeArchive, match="'l' links to '../../../../outside', outside the install"):
        install_staged(home, RID, "2.0-cpu", populate, no_probe)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("id", "other", "id 'other', not 'demo'"),
    ("install", "9.9-cpu", "install '9.9-cpu', not '1.0-cpu'"),
    ("worker", "bin/superfluid-worker-other", "worker 'bin/superfluid-worker-other'"),
])
def test_receipt_must_describe_the_install(tmp_path: Path, field: str, value: str, fragment: str) -> None:
    home = tmp_path / "home"
    with pytest.raises(StoreError, match=fragment):
        install_staged(home, RID, "1.0-cpu", lambda s: receipt("1.0-cpu", **{field: value}), no_probe)
    assert sorted(os.listdir(root_of(home))) == [".install.lock"]


def test_bad_names_touch_nothing(tmp_path: Path) -> None:
    with pytest.raises(BadName):
        install_staged(tmp_path / "home", RID, "../evil", populating("x-cpu"), no_probe)
    with pytest.raises(BadName):
        install_staged(tmp_path / "home", "../evil", "1.0-cpu", populating("1.0-cpu"), no_probe)
    assert not (tmp_path / "home").exists()


# --- the order of the steps, and what stops them ------------------------------------------------------

def test_stage_probe_receipt_publish_in_that_order_under_the_lock(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = root_of(home)
    seen: list[str] = []

    def stage(staging: Path) -> Receipt | None:
        assert staging.parent == root and staging.name.startswith(".staging-")
        assert (staging / "lib").is_dir() and os.access(staging / worker_path(RID), os.X_OK)  # launcher first
        assert not (staging / "runtime.json").exists()
        holder = mutex_owner(root)
        assert holder is not None and holder.pid == os.getpid()
        (staging / "lib" / "libengine.so").write_text("engine")
        seen.append("stage")
        return None

    def probe(staging: Path) -> Receipt:
        assert seen == ["stage"] and (staging / "lib" / "libengine.so").is_file()
        assert not (staging / "runtime.json").exists()  # the probe judges the library, not a receipt
        assert not (root / "1.0-cpu").exists() and not (root / "current").exists()  # nothing published yet
        seen.append("probe")
        return receipt("1.0-cpu")

    published = install_staged(home, RID, "1.0-cpu", stage, probe)
    assert seen == ["stage", "probe"]
    assert read_receipt(root / "1.0-cpu" / "runtime.json") == published.receipt
    recorded = {f["path"] for f in published.receipt.extra[FILES]}  # every staged file, the receipt aside
    assert "lib/libengine.so" in recorded and worker_path(RID) in recorded and "runtime.json" not in recorded
    assert os.readlink(root / "current") == "1.0-cpu" and leftovers(home) == []


def test_a_stages_receipt_is_in_place_for_the_probe(tmp_path: Path) -> None:
    seen: list[bool] = []
    install_staged(tmp_path, RID, "1.0-cpu", populating("1.0-cpu"),
                   lambda staging: seen.append((staging / "runtime.json").is_file()))  # type: ignore[func-returns-value]
    assert seen == [True]


class Refused(Exception):
    """A step's refusal (a probe that does not publish)."""


def _raise(error: BaseException) -> None:
    raise error


@pytest.mark.parametrize(("stage", "probe", "error"), [
    pytest.param(lambda s: _raise(Refused("stage")), no_probe, Refused, id="stage-raises"),
    pytest.param(populating("2.0-cpu"), lambda s: _raise(Refused("probe")), Refused, id="probe-raises"),
    pytest.param(populating("2.0-cpu"), lambda s: _raise(KeyboardInterrupt()), KeyboardInterrupt,
                 id="interrupted-in-probe"),
    pytest.param(lambda s: None, lambda s: None, StoreError, id="no-receipt-from-either"),
    pytest.param(lambda s: ((s / worker_path(RID)).unlink(), receipt("2.0-cpu"))[1], no_probe, StoreError,
                 id="no-runnable-worker"),
    pytest.param(lambda s: ((s / worker_path(RID)).chmod(0o644), receipt("2.0-cpu"))[1], no_probe, StoreError,
                 id="worker-not-executable"),
    pytest.param(populating("2.0-cpu"), lambda s: receipt("3.0-cpu"), StoreError, id="probe-describes-another"),
    pytest.param(lambda s: _raise(OSError(28, "No space left on device")), no_probe, StoreError,
                 id="a-filesystem-fault-is-a-store-error"),
])
def test_what_stops_an_install_publishes_nothing(tmp_path: Path, stage: object, probe: object,
                                                   error: type[BaseException]) -> None:
    home = tmp_path / "home"
    do_install(home, "1.0-cpu", "old")
    before = snapshot(home)
    with pytest.raises(error):
        install_staged(home, RID, "2.0-cpu", stage, probe)  # type: ignore[arg-type]
    assert snapshot(home) == before  # no staging left, the old install and current as they were


def test_a_linked_runtime_folder_is_refused_before_anything(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "elsewhere").mkdir()
    (home / "runtimes").mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", root_of(home))
    with pytest.raises(StoreError, match="symbolic link"):
        install_staged(home, RID, "1.0-cpu", populating("1.0-cpu"), no_probe)
    assert os.listdir(tmp_path / "elsewhere") == []


def test_published_says_what_it_did(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = install_staged(home, RID, "1.0-cpu", populating("1.0-cpu"), no_probe)
    assert (first.replaced, first.current, first.pinned, first.cleaned) == (False, "1.0-cpu", None, ())
    store.pin(home, RID, "1.0-cpu")
    dead = root_of(home) / ".staging-2.0-cpu-999999999-0123456789abcdef"
    dead.mkdir()
    again = install_staged(home, RID, "2.0-cpu", populating("2.0-cpu"), no_probe)
    assert (again.replaced, again.current, again.pinned) == (False, "1.0-cpu", "1.0-cpu")  # the pin holds
    assert len(again.cleaned) == 1 and not dead.exists()
    assert install_staged(home, RID, "2.0-cpu", populating("2.0-cpu"), no_probe).replaced

