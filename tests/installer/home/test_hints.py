"""The fixes of the home's refusals (installer/home/hints.py, the repairs of store.py and upkeep.py, and
the commands that use them), each provoked through the real CLI, pasted as a user would in the same
situation (tests/cli.paste), and checked to do what it says (issue 42)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from superfluid.installer.home.hints import install_it, list_them, remove_it
from tests import cli
from tests.conftest import Home

LIB = "lib/libbaseRT.so"


def test_each_fix_is_the_command_it_names() -> None:
    assert (install_it("basert").argv, install_it("basert").does) == (
        ("superfluid", "runtime", "install", "basert"), "installs it")
    assert list_them("basert").command == "superfluid runtime list basert"
    assert remove_it("basert", "odd").text() == "`superfluid runtime remove basert odd` removes it"


@pytest.fixture
def mirrored(cli_home: Home, mirror: Path) -> Home:
    """A fresh home whose source is the mirror folder, named by SUPERFLUID_MIRROR (so that a pasted
    command that names no source finds the releases); GitHub unreachable."""
    cli_home.env["SUPERFLUID_MIRROR"] = str(mirror)
    cli_home.env["SUPERFLUID_GITHUB_API"] = "http://127.0.0.1:9"
    return cli_home


def _installed(home: Home, *versions: str, extra: tuple[str, ...] = ()) -> None:
    for version in versions:
        run = home.superfluid("runtime", "install", "basert", "--version", version, *extra)
        assert run.code == 0, run.stderr


def test_not_installed_names_the_install(mirrored: Home) -> None:
    run = mirrored.superfluid("runtime", "use", "basert", "--auto")
    assert run.code == 1 and "basert is not installed" in run.stderr
    assert run.stderr.rstrip().endswith("`superfluid runtime install basert` installs it")
    done = cli.paste(run.fix("install"), run, env=mirrored.env)
    assert done.code == 0 and mirrored.installs() == ["0.4.0-cpu"], done.stderr


def test_an_install_that_is_not_there_names_the_listing(mirrored: Home) -> None:
    _installed(mirrored, "0.4.0")
    run = mirrored.superfluid("runtime", "use", "basert", "nope")
    assert run.code == 1 and "basert has no install nope (installed: 0.4.0-cpu)" in run.stderr
    done = cli.paste(run.fix("list"), run, env=mirrored.env)
    assert done.code == 0 and "0.4.0-cpu" in done.stdout


def test_use_of_a_broken_install_names_its_repair(mirrored: Home) -> None:
    _installed(mirrored, "0.3.1", "0.4.0")
    (mirrored.basert / "0.3.1-cpu" / LIB).unlink()
    run = mirrored.superfluid("runtime", "use", "basert", "0.3.1-cpu")
    assert run.code == 1 and "basert 0.3.1-cpu is broken" in run.stderr
    done = cli.paste(run.fix("repair"), run, env=mirrored.env)
    assert done.code == 0 and (mirrored.basert / "0.3.1-cpu" / LIB).is_file(), done.stderr
    assert mirrored.current() == "0.4.0-cpu"  # put back, and the default is as it was


def test_auto_with_every_install_broken_names_the_repair_of_each(mirrored: Home) -> None:
    _installed(mirrored, "0.3.1", "0.4.0")
    for install in ("0.3.1-cpu", "0.4.0-cpu"):
        (mirrored.basert / install / "runtime.json").write_text("{")  # receipts that do not read
    run = mirrored.superfluid("runtime", "use", "basert", "--auto")
    assert run.code == 1 and "no install of basert reads" in run.stderr
    repairs = [f.argv for f in run.fixes if "repair" in f.argv]
    assert repairs == [("superfluid", "runtime", "repair", "basert", "0.3.1-cpu"),
                       ("superfluid", "runtime", "repair", "basert", "0.4.0-cpu")]
    done = cli.paste(run.fix("repair", "0.4.0-cpu"), run, env=mirrored.env)
    assert done.code == 0, done.stderr
    assert json.loads((mirrored.basert / "0.4.0-cpu" / "runtime.json").read_text())["install"] == "0.4.0-cpu"


def test_a_bare_repair_with_several_broken_and_no_current_names_each(mirrored: Home) -> None:
    _installed(mirrored, "0.3.1", "0.4.0")
    for install in ("0.3.1-cpu", "0.4.0-cpu"):
        (mirrored.basert / install / "runtime.json").write_text("{")  # receipts that do not read
    (mirrored.basert / "current").unlink()
    run = mirrored.superfluid("runtime", "repair", "basert")
    assert run.code == 1 and "several installs are broken" in run.stderr, run.stderr
    assert [f.argv[-1] for f in run.fixes] == ["0.3.1-cpu", "0.4.0-cpu"]
    done = cli.paste(run.fix("repair", "0.3.1-cpu"), run, env=mirrored.env)
    assert done.code == 0, done.stderr
    assert json.loads((mirrored.basert / "0.3.1-cpu" / "runtime.json").read_text())["install"] == "0.3.1-cpu"


def test_a_repair_of_a_name_that_says_nothing_names_its_removal(mirrored: Home) -> None:
    _installed(mirrored, "0.4.0")
    odd = mirrored.basert / "odd"
    shutil.copytree(mirrored.basert / "0.4.0-cpu", odd, symlinks=True)
    (odd / "runtime.json").write_text("{")
    run = mirrored.superfluid("runtime", "repair", "basert", "odd")
    assert run.code == 1 and "its name does not say what to reinstall" in run.stderr, run.stderr
    done = cli.paste(run.fix("remove"), run, env=mirrored.env)
    assert done.code == 0 and not odd.exists() and mirrored.installs() == ["0.4.0-cpu"], done.stderr


def test_remove_without_an_install_names_the_listing(mirrored: Home) -> None:
    _installed(mirrored, "0.4.0")
    run = mirrored.superfluid("runtime", "remove", "basert")
    assert run.code == 2 and "`superfluid runtime list basert` lists its installs" in run.stderr
    done = cli.paste(run.fix("list"), run, env=mirrored.env)
    assert done.code == 0 and "0.4.0-cpu" in done.stdout


def test_repair_of_an_install_that_is_not_there_names_the_listing(mirrored: Home) -> None:
    _installed(mirrored, "0.4.0")
    (mirrored.basert / "0.4.0-cpu" / "runtime.json").write_text("{")  # so the repair reinstalls by name
    run = mirrored.superfluid("runtime", "repair", "basert", "0.3.1-cpu")
    assert run.code == 1 and "basert has no install 0.3.1-cpu" in run.stderr, run.stderr
    done = cli.paste(run.fix("list"), run, env=mirrored.env)
    assert done.code == 0 and "0.4.0-cpu" in done.stdout


def test_update_names_the_removal_of_the_install_it_leaves(mirrored: Home, mirror: Path) -> None:
    _installed(mirrored, "0.3.1")
    run = mirrored.superfluid("runtime", "update", "basert", "--mirror", str(mirror))
    assert run.code == 0, run.stderr
    assert "basert 0.3.1-cpu stays installed: `superfluid runtime remove basert 0.3.1-cpu` removes it" in run.stderr
    done = cli.paste(run.fix("remove"), run, env=mirrored.env)
    assert done.code == 0 and mirrored.installs() == ["0.4.0-cpu"], done.stderr


def test_update_of_a_newer_install_names_the_newest_beside_it(mirrored: Home, mirror: Path) -> None:
    _installed(mirrored, "0.5.0", extra=("--untested",))
    run = mirrored.superfluid("runtime", "update", "basert", "--mirror", str(mirror))
    assert run.code == 0, run.stderr
    assert run.stdout == ("superfluid: basert 0.5.0-cpu: it is 0.5.0, newer than 0.4.0, the newest that installs "
                          "here; nothing to update: `superfluid runtime install basert --version 0.4.0 --mirror "
                          f"{mirror}` installs 0.4.0 beside it\n")
    doc = mirrored.superfluid("runtime", "update", "basert", "--mirror", str(mirror), "--json").json()
    assert doc["fix"] == f"superfluid runtime install basert --version 0.4.0 --mirror {mirror}"
    done = cli.paste(run.fix("install"), run, env=mirrored.env)
    assert done.code == 0 and mirrored.installs() == ["0.4.0-cpu", "0.5.0-cpu"], done.stderr


def test_update_of_nothing_installed_names_the_install(mirrored: Home) -> None:
    run = mirrored.superfluid("runtime", "update", "basert")
    assert run.code == 1 and "basert is not installed" in run.stderr
    done = cli.paste(run.fix("install"), run, env=mirrored.env)
    assert done.code == 0 and mirrored.installs() == ["0.4.0-cpu"], done.stderr


def test_a_home_with_nothing_of_the_runtime_names_the_install_to_remove_or_pin(mirrored: Home) -> None:
    for argv in (("runtime", "remove", "basert", "0.4.0-cpu"), ("runtime", "use", "basert", "0.4.0-cpu")):
        run = mirrored.superfluid(*argv)
        assert run.code == 1 and "(installed: none)" in run.stderr, run.stderr
        assert run.fix("install").argv == ("superfluid", "runtime", "install", "basert")
    run = mirrored.superfluid("runtime", "remove", "basert", "--all")
    assert run.code == 1 and "basert is not installed" in run.stderr
    done = cli.paste(run.fix("install"), run, env=mirrored.env)
    assert done.code == 0 and os.path.isdir(mirrored.basert / "0.4.0-cpu"), done.stderr
