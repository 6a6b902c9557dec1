"""Which kept worker command lines ``superfluid serve`` may start ahead (``serve_ahead.startable``): only
this superfluid's own workers, which wait for the word to go, so that its cache file never names a
program to run and no changed launcher runs before its install is judged."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from superfluid.installer.home.launcher import write_worker_launcher
from superfluid.runtime.kernel.layout import shipped_dirs
from superfluid.serve_ahead import startable

BESIDE = os.path.join(shipped_dirs()[0], "superfluid-worker-llamacpp")


@pytest.mark.parametrize(("argv", "named", "ok"), [
    pytest.param([BESIDE, "serve", "--model", "m"], None, True, id="beside superfluid"),
    pytest.param(["{home}/runtimes/llamacpp/b1-cpu/bin/superfluid-worker-llamacpp", "serve"], None, True,
                 id="an install's launcher"),
    pytest.param(["{home}/runtimes/llamacpp/current/bin/superfluid-worker-llamacpp", "serve"], None, True,
                 id="through current"),
    pytest.param(["{home}/runtimes/basert/b1-cpu/bin/superfluid-worker-llamacpp", "serve"], None, False,
                 id="another runtime's folder"),
    pytest.param(["{home}/runtimes/llamacpp/b1-cpu/lib/superfluid-worker-llamacpp", "serve"], None, False,
                 id="not in bin"),
    pytest.param(["{tmp}/superfluid-worker-llamacpp", "serve"], None, False, id="a worker's name elsewhere"),
    pytest.param(["{tmp}/anything", "serve"], "{tmp}/anything", False, id="named by SUPERFLUID_WORKER_LLAMACPP"),
    pytest.param(["/bin/sh", "serve"], None, False, id="a shell"),
    pytest.param(["superfluid-worker-llamacpp", "serve"], None, False, id="relative"),
    pytest.param([BESIDE, "check"], None, False, id="not serve"),
    pytest.param([BESIDE], None, False, id="no command"),
    pytest.param([os.path.join(shipped_dirs()[0], "superfluid-worker-nosuch"), "serve"], None, False,
                 id="no such runtime"),
])
def test_only_a_worker_of_this_superfluid_is_started_ahead(argv: list[str], named: str | None, ok: bool,
                                                           tmp_path: Path) -> None:
    home = tmp_path / "home"
    for runtime_id in ("llamacpp", "basert"):
        write_worker_launcher(home / "runtimes" / runtime_id / "b1-cpu", "llamacpp")
    (home / "runtimes" / "llamacpp" / "current").symlink_to("b1-cpu")
    (home / "runtimes" / "llamacpp" / "b1-cpu" / "lib").mkdir()
    (home / "runtimes" / "llamacpp" / "b1-cpu" / "lib" / "superfluid-worker-llamacpp").write_text("")
    fill = {"home": str(home), "tmp": str(tmp_path)}
    env = {"SUPERFLUID_HOME": str(home)}
    if named is not None:
        env["SUPERFLUID_WORKER_LLAMACPP"] = named.format(**fill)
    assert startable([a.format(**fill) for a in argv], env) is ok


def test_an_install_launcher_changed_since_it_was_written_is_not_started(tmp_path: Path) -> None:
    home = tmp_path / "home"
    launcher = write_worker_launcher(home / "runtimes" / "llamacpp" / "b1-cpu", "llamacpp")
    assert startable([str(launcher), "serve"], {"SUPERFLUID_HOME": str(home)})
    launcher.write_text(launcher.read_text() + "# one more line\n")
    assert not startable([str(launcher), "serve"], {"SUPERFLUID_HOME": str(home)})


def test_a_link_in_the_home_to_a_program_elsewhere_is_not_started(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bin_dir = home / "runtimes" / "llamacpp" / "b1-cpu" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "superfluid-worker-llamacpp").symlink_to(sys.executable)
    assert not startable([str(bin_dir / "superfluid-worker-llamacpp"), "serve"], {"SUPERFLUID_HOME": str(home)})
