"""A repair leaves a good install alone when ``current`` is what is broken (issue 44, item 3).

With ``current`` a link to ``/etc``, to an install outside the home, dangling, a loop, a link to ``.``,
a regular file, a directory, or gone, in a home holding two good baseRT installs, the real
``superfluid runtime repair basert --mirror M`` puts ``current`` back to the install it should name
(the pinned one, else the best-ranked) and changes no install: every file keeps its inode, change
time and modification time, the receipt its bytes; it says what it did, and a second repair says
nothing is to repair. A file or a directory found in ``current``'s place is kept, never deleted. Every
other command calls the installs ready meanwhile: a bad ``current`` is no fault of an install.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.conftest import native_cache
from tests.faults.conftest import Home, tree_digest
from tests.serving_client import SuperfluidServe

INSTALLS = ("0.3.1-cpu", "0.4.0-cpu")
MODEL = native_cache() / "basert" / "models" / "tiny.base"

Stats = dict[str, tuple[int, int, int, int]]


def _stats(install: Path) -> Stats:
    """Each path of an install (itself too) by its inode, modification time, change time and size,
    links not followed: any rewrite, replacement or touch of a file changes one of them."""
    found: Stats = {}
    for top, dirs, files in os.walk(install):
        for name in [*dirs, *files, "."] if top == str(install) else [*dirs, *files]:
            path = os.path.normpath(os.path.join(top, name))
            st = os.lstat(path)
            found[os.path.relpath(path, install)] = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    return found


def _link_to(target: str) -> Callable[[Path, Path], None]:
    return lambda current, tmp: os.symlink(target, current)


def _outside(current: Path, tmp: Path) -> None:
    """A link to a copy of 0.3.1-cpu outside the home (a home moved with absolute links)."""
    out = tmp / "elsewhere" / "0.3.1-cpu"
    shutil.copytree(current.parent / "0.3.1-cpu", out, symlinks=True)
    os.symlink(str(out), current)


def _file(current: Path, tmp: Path) -> None:
    current.write_text("0.3.1-cpu\n")  # what a tool that keeps no links writes in a link's place


def _dir(current: Path, tmp: Path) -> None:
    current.mkdir()
    (current / "notes.txt").write_text("the user's, kept here by mistake\n")


def _gone(current: Path, tmp: Path) -> None:
    pass


#: the broken `current`: (how it is made, what the repair says it was, whether it is kept aside)
CURRENTS = [
    pytest.param(_link_to("/etc"), "points outside", False, id="link-to-etc"),
    pytest.param(_outside, "points outside", False, id="link-to-an-install-outside-the-home"),
    pytest.param(_link_to("9.9.9-cpu"), "is dangling: 9.9.9-cpu does not exist", False, id="dangling"),
    pytest.param(_link_to("current"), "is a link loop", False, id="loop"),
    pytest.param(_link_to("."), "points at ., which is not an install", False, id="link-to-dot"),
    pytest.param(_file, "is a regular file, not a link to an install", True, id="regular-file"),
    pytest.param(_dir, "is a directory, not a link to an install", True, id="directory"),
    pytest.param(_gone, "is missing", False, id="gone"),
]


def _break(home: Home, make: Callable[[Path, Path], None], tmp: Path) -> Path:
    current = home.basert / "current"
    current.unlink()
    make(current, tmp)
    return current


def _snapshot(home: Home) -> dict[str, Any]:
    return {n: (_stats(home.basert / n), (home.basert / n / "runtime.json").read_bytes()) for n in INSTALLS}


def _kept(home: Home) -> list[Path]:
    return sorted(home.basert.glob(".current-set-aside-*"))


@pytest.mark.parametrize(("make", "was", "kept"), CURRENTS)
def test_repair_puts_current_back_and_changes_no_install(installed_home: Home, tmp_path: Path,
                                                         make: Callable[[Path, Path], None], was: str,
                                                         kept: bool) -> None:
    current = _break(installed_home, make, tmp_path)
    before = _snapshot(installed_home)
    outside = tree_digest(tmp_path / "elsewhere") if (tmp_path / "elsewhere").exists() else None
    what = (current / "notes.txt").read_text() if current.is_dir() and not current.is_symlink() else (
        current.read_text() if current.is_file() and not current.is_symlink() else None)

    run = installed_home.sf("runtime", "repair", "basert", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    assert installed_home.current() == "0.4.0-cpu"  # relative, to the best-ranked install
    assert _snapshot(installed_home) == before  # same inodes, times and bytes: no install was touched
    first, second = run.stdout.splitlines()
    assert first.startswith(f"superfluid: current of basert named no install ({current} ") and was in first, first
    assert first.split("; it now names ", 1)[1].startswith("0.4.0-cpu, the best-ranked install"), first
    assert second == "superfluid: every file of basert 0.4.0-cpu is as its receipt records it: left as it is"
    assert "reinstalled" not in run.stdout + run.stderr and "installing" not in run.stderr
    if outside is not None:
        assert tree_digest(tmp_path / "elsewhere") == outside
    if kept:  # what stood in current's place is kept whole, and said where
        (aside,) = _kept(installed_home)
        assert first.endswith(f"; what stood there is kept as {aside}"), first
        assert (aside / "notes.txt" if aside.is_dir() else aside).read_text() == what
    else:
        assert _kept(installed_home) == [] and "kept" not in first

    again = installed_home.sf("runtime", "repair", "basert", *installed_home.repair_flags())
    assert again.code == 0, again.stderr
    assert again.stdout == ("superfluid: every file of basert 0.4.0-cpu is as its receipt records it: "
                            "nothing to repair\n")
    assert _snapshot(installed_home) == before and installed_home.current() == "0.4.0-cpu"


@pytest.mark.parametrize(("make", "was", "kept"), [CURRENTS[0], CURRENTS[6]])
def test_the_json_answer_says_what_was_done_to_current(installed_home: Home, tmp_path: Path,
                                                       make: Callable[[Path, Path], None], was: str,
                                                       kept: bool) -> None:
    current = _break(installed_home, make, tmp_path)
    run = installed_home.sf("runtime", "repair", "basert", "--json", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "repair-noop") == []
    assert (doc["install"], doc["repaired"], doc["verified"]["ok"]) == ("0.4.0-cpu", False, True)
    put_back = doc["current_put_back"]
    assert put_back["was"].startswith(str(current)) and was in put_back["was"]
    assert (put_back["names"], put_back["chosen"]) == ("0.4.0-cpu", "best-ranked")
    assert put_back["kept"] == ([str(p) for p in _kept(installed_home)] or [None])[0]
    assert (put_back["kept"] is not None) == kept
    again = installed_home.sf("runtime", "repair", "basert", "--json", *installed_home.repair_flags())
    assert again.json()["current_put_back"] is None and schema_errors(again.json(), "repair-noop") == []


@pytest.mark.parametrize(("make", "was", "kept"), [CURRENTS[0], CURRENTS[6]])
def test_current_goes_back_to_the_pinned_install(installed_home: Home, tmp_path: Path,
                                                 make: Callable[[Path, Path], None], was: str, kept: bool) -> None:
    """The pin says which install was in use: current names it again, not the best-ranked one."""
    assert installed_home.sf("runtime", "use", "basert", "0.3.1-cpu").code == 0
    _break(installed_home, make, tmp_path)
    before = _snapshot(installed_home)
    run = installed_home.sf("runtime", "repair", "basert", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    assert "it now names 0.3.1-cpu, the pinned install" in run.stdout
    assert "every file of basert 0.3.1-cpu is as its receipt records it: left as it is" in run.stdout
    assert installed_home.current() == "0.3.1-cpu" and _snapshot(installed_home) == before


def test_a_repair_of_a_named_install_puts_current_back_too(installed_home: Home, tmp_path: Path) -> None:
    _break(installed_home, _dir, tmp_path)
    before = _snapshot(installed_home)
    run = installed_home.sf("runtime", "repair", "basert", "0.3.1-cpu", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    assert "it now names 0.4.0-cpu, the best-ranked install" in run.stdout
    assert "every file of basert 0.3.1-cpu is as its receipt records it: left as it is" in run.stdout
    assert installed_home.current() == "0.4.0-cpu" and _snapshot(installed_home) == before
    assert len(_kept(installed_home)) == 1


def test_a_changed_install_is_put_back_after_current(installed_home: Home, tmp_path: Path) -> None:
    """current named no install and the pinned install lost a file: current goes back to the pin (a pin
    is the user's word, broken or not), then the file is put back; --json says both (install-result
    with current_put_back)."""
    assert installed_home.sf("runtime", "use", "basert", "0.4.0-cpu").code == 0
    _break(installed_home, _link_to("/etc"), tmp_path)
    lib = next((installed_home.basert / "0.4.0-cpu" / "lib").glob("libbaseRT*"))
    lib.unlink()
    other = _stats(installed_home.basert / "0.3.1-cpu")
    run = installed_home.sf("runtime", "repair", "basert", "--json", *installed_home.repair_flags())
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "install-result") == []
    assert doc["repaired"] is True and doc["put_back"] == [f"lib/{lib.name}"]
    assert (doc["current_put_back"]["names"], doc["current_put_back"]["chosen"]) == ("0.4.0-cpu", "pinned")
    assert "points outside" in doc["current_put_back"]["was"]
    assert installed_home.current() == "0.4.0-cpu" and lib.is_file()
    assert _stats(installed_home.basert / "0.3.1-cpu") == other


def _word(rows: list[dict[str, Any]], install: str) -> str:
    return next(str(r["state"]) for r in rows if r["install"] == install)


@pytest.mark.parametrize(("make", "was", "kept"), CURRENTS)
def test_a_bad_current_makes_no_install_look_broken(installed_home: Home, tmp_path: Path,
                                                    make: Callable[[Path, Path], None], was: str, kept: bool) -> None:
    """``runtime list`` and ``runtime verify`` call both installs ready and verified, and ``runtime
    use`` makes one the default as asked (a file or directory in current's place kept aside)."""
    current = _break(installed_home, make, tmp_path)
    listed = installed_home.sf("runtime", "list", "basert", "--json")
    assert listed.code == 0 and schema_errors(listed.json(), "installs") == [], listed.stderr
    assert {i["install"]: (i["state"], i["problem"]) for i in listed.json()["installs"]} == {
        n: ("ready", None) for n in INSTALLS}
    verified = installed_home.sf("runtime", "verify", "basert")
    assert verified.code == 0, verified.stdout + verified.stderr
    assert all(f"basert {n}: verified" in verified.stdout for n in INSTALLS)
    before = _snapshot(installed_home)
    use = installed_home.sf("runtime", "use", "basert", "0.3.1-cpu", "--json")
    assert use.code == 0, use.stdout + use.stderr
    assert (use.json()["current"], use.json()["state"]) == ("0.3.1-cpu", "ready")
    assert installed_home.current() == "0.3.1-cpu" and _snapshot(installed_home) == before
    assert len(_kept(installed_home)) == (1 if kept else 0)
    assert not kept or current.is_symlink()


def test_doctor_gc_and_serve_call_the_installs_ready_with_a_bad_current(installed_home: Home, tmp_path: Path) -> None:
    _break(installed_home, _dir, tmp_path)
    doctor = installed_home.sf("doctor", "--json", timeout=60)
    row = next(r for r in doctor.json()["runtimes"] if r["id"] == "basert")
    assert {i["install"]: i["state"] for i in row["installed"]} == {n: "ready" for n in INSTALLS}, row
    gc = installed_home.sf("runtime", "gc", "basert", "--keep", "9", "--dry-run", "--json")
    assert gc.code == 0 and {k["install"]: k["state"] for k in gc.json()["kept"]} == {n: "ready" for n in INSTALLS}
    server = SuperfluidServe([cli.script("superfluid"), "serve", "--model", str(MODEL), "--port", "0", "--runtime",
                              "basert@0.3.1-cpu"], installed_home.env)
    try:
        assert server.ready["where"] == f"installed: {installed_home.basert / '0.3.1-cpu'}", server.ready["line"]
    finally:
        server.stop()
    assert (installed_home.basert / "current" / "notes.txt").is_file()  # nothing of these changed it

