"""A broken install sends no one in circles (issue 25, item 4), through the real CLI: with a file its
receipt records gone from a second (not current) install, ``runtime use`` refuses it; ``runtimes``,
``serve`` and ``runtime list`` name ``superfluid runtime repair <id> <install>`` (never ``runtime
install``, which does not fix it); after the repair it is pinned and served as any other."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.conftest import native_cache
from tests.end_to_end.conftest import Home

LIB = "libbaseRT.dylib" if sys.platform == "darwin" else "libbaseRT.so"
MODEL = native_cache() / "basert" / "models" / "tiny.base"



def _listed(home: Home, install: str) -> dict[str, Any]:
    run = home.superfluid("runtime", "list", "basert", "--json")
    assert run.code == 0 and schema_errors(run.json(), "installs") == [], run.stderr
    return next(i for i in run.json()["installs"] if i["install"] == install)  # type: ignore[no-any-return]


def _basert_row(home: Home) -> dict[str, Any]:
    run = home.superfluid("runtimes", "--json")
    assert run.code == 0 and schema_errors(run.json(), "runtimes") == [], run.stderr
    return next(r for r in run.json() if r["id"] == "basert")  # type: ignore[no-any-return]


def test_use_refuses_a_second_install_whose_lib_is_gone_and_names_the_repair(two: Home) -> None:
    shutil.rmtree(two.basert / "0.3.1-cpu" / "lib")
    run = two.superfluid("runtime", "use", "basert", "0.3.1-cpu")
    assert run.code == 1, run.stdout
    assert run.stderr == (f"superfluid: basert 0.3.1-cpu is broken (missing lib/LICENSE, lib/{LIB}); it is not made "
                          "the default: `superfluid runtime repair basert 0.3.1-cpu` puts it back\n")
    assert two.current() == "0.4.0-cpu" and not (two.basert / "pinned").exists()  # nothing changed
    listed = _listed(two, "0.3.1-cpu")
    assert listed["state"] == "broken" and listed["fix"] == "superfluid runtime repair basert 0.3.1-cpu"
    assert _basert_row(two)["state"] == "ready"  # the current install is whole
    assert (f"basert: 0.3.1-cpu (not the current install) is broken: missing lib/LICENSE, lib/{LIB}: "
            "`superfluid runtime repair basert 0.3.1-cpu` puts it back\n") in two.superfluid("runtimes").stdout

    run = two.superfluid("runtime", "repair", "basert", "0.3.1-cpu")
    assert run.code == 0, run.stderr
    run = two.superfluid("runtime", "use", "basert", "0.3.1-cpu")
    assert run.code == 0 and two.current() == "0.3.1-cpu", run.stderr
    listed = _listed(two, "0.3.1-cpu")
    assert (listed["state"], listed["problem"], listed["current"], listed["pinned"]) == ("ready", None, True, True)


def test_runtimes_names_the_repair_of_a_broken_current_install(two: Home) -> None:
    (two.basert / "0.4.0-cpu" / "lib" / LIB).unlink()
    row = _basert_row(two)
    assert row["state"] == "broken" and row["install"] == "0.4.0-cpu"
    assert row["ready"] == f"0.4.0-cpu is broken: missing lib/{LIB}"
    assert row["fix"] == "superfluid runtime repair basert 0.4.0-cpu"
    text = two.superfluid("runtimes").stdout
    assert "`superfluid runtime repair basert 0.4.0-cpu` puts it back" in text
    assert "runtime install basert" not in text


def test_serve_refuses_a_broken_install_with_the_repair_exit_4(two: Home) -> None:
    shutil.rmtree(two.basert / "0.3.1-cpu" / "lib")
    run = two.superfluid("serve", "--model", str(MODEL), "--port", "0", "--runtime", "basert@0.3.1-cpu")
    assert run.code == 4
    assert "basert 0.3.1-cpu is broken: missing lib/LICENSE" in run.stderr
    assert run.stderr.rstrip().endswith("`superfluid runtime repair basert 0.3.1-cpu` puts it back")
    assert cli.paste(run.fix("repair"), run, env=two.env).code == 0
    assert _listed(two, "0.3.1-cpu")["state"] == "ready"

    (two.basert / "0.4.0-cpu" / "lib" / LIB).unlink()  # the current one: served by default
    run = two.superfluid("serve", "--model", str(MODEL), "--port", "0")
    assert run.code == 4 and "runtime install" not in run.stderr
    assert "`superfluid runtime repair basert 0.4.0-cpu` puts it back" in run.stderr


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _no_exec(path: Path) -> None:
    path.chmod(0o644)


def _dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


#: (what is done to a recorded file, which, the verdict runtime list and use say of it, and why)
DAMAGE = [
    pytest.param(_truncate, f"lib/{LIB}", "changed", f"changed lib/{LIB} (0 bytes; the receipt records ",
                 id="truncated"),
    pytest.param(_no_exec, "bin/superfluid-worker-basert", "changed",
                 "changed bin/superfluid-worker-basert (it is no longer executable", id="not-executable"),
    pytest.param(_dir, "lib/LICENSE", "broken", "changed lib/LICENSE (it is a directory; the receipt records a file",
                 id="a-dir"),
]


@pytest.mark.parametrize(("damage", "path", "state", "said"), DAMAGE)
def test_a_glance_finds_each_damage_without_hashing(two: Home, damage: Any, path: str, state: str, said: str) -> None:
    damage(two.basert / "0.3.1-cpu" / path)
    listed = _listed(two, "0.3.1-cpu")
    assert listed["state"] == state and listed["problem"].startswith(said), listed
    run = two.superfluid("runtime", "use", "basert", "0.3.1-cpu")
    assert run.code == 1 and said in run.stderr and two.current() == "0.4.0-cpu"


def test_a_flipped_byte_is_seen_by_a_glance_and_named_by_verify(two: Home) -> None:
    """Issue 42, design point 3: a file rewritten in place at its size changes its stat facts, which
    the receipt records: a glance calls it changed (it was ready before); verify names the byte."""
    lib = two.basert / "0.3.1-cpu" / "lib" / LIB
    data = bytearray(lib.read_bytes())
    data[-1] ^= 1
    lib.write_bytes(bytes(data))
    listed = _listed(two, "0.3.1-cpu")
    assert listed["state"] == "changed" and "rewritten since it was installed" in listed["problem"], listed
    run = two.superfluid("runtime", "verify", "basert", "0.3.1-cpu")
    assert run.code == 1 and f"changed lib/{LIB} (its SHA-256 is" in run.stdout
    assert _listed(two, "0.3.1-cpu")["state"] == "changed"  # a hash that does not hold records nothing


def test_a_changed_current_install_is_changed_to_runtimes_list_use_and_serve(two: Home) -> None:
    """Issue 35: one glance judges an install for all four commands. A byte added to the current
    install's library (its check still passes) was ``ready`` to ``runtimes`` and served by ``serve``,
    while ``runtime list`` said broken and ``use`` refused it; ``use --auto`` made it the default.
    Issue 42: each says the one word of the verdict, changed."""
    with (two.basert / "0.4.0-cpu" / "lib" / LIB).open("ab") as f:
        f.write(b"\0")
    said = f"changed lib/{LIB} ("
    repair = "`superfluid runtime repair basert 0.4.0-cpu` puts it back"
    listed = _listed(two, "0.4.0-cpu")
    assert listed["state"] == "changed" and listed["problem"].startswith(said), listed
    row = _basert_row(two)
    assert (row["state"], row["install"]) == ("changed", "0.4.0-cpu") and "version" not in row
    assert row["ready"].startswith(f"0.4.0-cpu is changed: {said}") and row["fix"] == repair.split("`")[1], row
    assert f"basert: 0.4.0-cpu is changed: {said}" in two.superfluid("runtimes").stdout
    run = two.superfluid("runtime", "use", "basert", "0.4.0-cpu")
    assert run.code == 1 and said in run.stderr and repair in run.stderr
    run = two.superfluid("serve", "--model", str(MODEL), "--port", "0")
    assert run.code == 4 and run.stdout == "", run.stderr
    assert f"basert 0.4.0-cpu is changed: {said}" in run.stderr and repair in run.stderr
    run = two.superfluid("runtime", "use", "basert", "--auto")  # the best-ranked whole install
    assert run.code == 0 and two.current() == "0.3.1-cpu", run.stderr
    assert _basert_row(two)["state"] == "ready"
    assert two.superfluid("runtime", "repair", "basert", "0.4.0-cpu").code == 0
    assert _listed(two, "0.4.0-cpu")["state"] == "ready"
