"""Installs survive the toolchain moving (issue 15, item 7).

An install's launcher (``<install>/bin/superfluid-worker-<id>``) does not exec the Python of the
environment that made it: it runs the worker under ``$SUPERFLUID_PYTHON`` (which every superfluid
sets for the workers it starts), else the Python of the ``superfluid`` on ``PATH``, else the one
that made the install while it exists; with none, it exits 127 naming the command that restores it.
The table runs a real launcher (``/bin/sh``) in each situation; the end-to-end test installs from
a throwaway environment, deletes that environment, and runs the install's worker as the daemon
would and through another superfluid.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from superfluid.installer.home.launcher import launcher_script
from tests import cli
from tests.conftest import native_cache
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

SYSTEM_PATH = "/usr/bin:/bin"
GONE = "/nonexistent/venv/bin/python"


def _install_dir(root: Path, made_by: str) -> Path:
    """``root/runtimes/basert/0.4.0-cpu`` with the launcher an install of it gets."""
    install = root / "runtimes" / "basert" / "0.4.0-cpu"
    (install / "bin").mkdir(parents=True)
    launcher = install / "bin" / "superfluid-worker-basert"
    launcher.write_text(launcher_script("basert", made_by=made_by))
    launcher.chmod(0o755)
    return install


def _linked_superfluid(d: Path) -> Path:
    """A ``bin/`` holding ``superfluid`` as a package manager's link to the real one."""
    d.mkdir()
    (d / "superfluid").symlink_to(cli.script("superfluid"))
    return d


def _copied_superfluid(d: Path) -> Path:
    """A ``bin/`` holding a copy of the console script (its ``#!`` names the real Python), no python beside."""
    d.mkdir()
    shutil.copy(cli.script("superfluid"), d / "superfluid")
    return d


def _run(install: Path, env: dict[str, str], *argv: str, cwd: Path | None = None) -> cli.Run:
    return cli.run(install / "bin" / "superfluid-worker-basert", *argv, env=env, cwd=cwd, timeout=60)


@pytest.mark.parametrize(("made_by", "situation", "runs"), [
    (GONE, "superfluid-on-path-as-a-link", True),
    (GONE, "superfluid-on-path-as-a-copy", True),
    (GONE, "superfluid-python-set", True),
    (sys.executable, "nothing-else", True),  # the environment that made it is still there
    (GONE, "nothing-else", False),
    (GONE, "superfluid-python-without-superfluid", False),
], ids=lambda v: v if isinstance(v, str) and not v.startswith("/") else None)
def test_the_launcher_finds_a_superfluid(tmp_path: Path, made_by: str, situation: str, runs: bool) -> None:
    install = _install_dir(tmp_path, made_by)
    env = {"PATH": SYSTEM_PATH, "HOME": str(tmp_path), "SUPERFLUID_HOME": str(tmp_path)}
    if situation == "superfluid-on-path-as-a-link":
        env["PATH"] = f"{_linked_superfluid(tmp_path / 'bin')}:{SYSTEM_PATH}"
    elif situation == "superfluid-on-path-as-a-copy":
        env["PATH"] = f"{_copied_superfluid(tmp_path / 'bin')}:{SYSTEM_PATH}"
    elif situation == "superfluid-python-set":
        env["SUPERFLUID_PYTHON"] = sys.executable
    elif situation == "superfluid-python-without-superfluid":
        env["SUPERFLUID_PYTHON"] = shutil.which("python3", path=SYSTEM_PATH) or "/usr/bin/python3"
    done = _run(install, env, "compat", "--json")
    if runs:
        assert done.code == 0, done.stderr
        assert json.loads(done.stdout)["requires"]["abi"] == 1
        return
    assert done.code == 127 and done.stdout == ""
    assert done.stderr.count("\n") == 1  # one line: a worker's reason is its last line
    assert "`superfluid runtime repair basert 0.4.0-cpu` rewrites" in done.stderr
    if situation == "nothing-else":
        assert f"no superfluid is on PATH, and {GONE} (the Python that made this install) is gone" in done.stderr


def test_the_launcher_hands_over_its_path_and_ignores_the_working_directory(tmp_path: Path) -> None:
    install = _install_dir(tmp_path, sys.executable)
    (tmp_path / "cwd" / "superfluid").mkdir(parents=True)
    (tmp_path / "cwd" / "superfluid" / "__init__.py").write_text("raise SystemExit('hijacked')\n")
    env = {"PATH": SYSTEM_PATH, "SUPERFLUID_HOME": str(tmp_path)}
    done = _run(install, env, "check", cwd=tmp_path / "cwd")
    assert "hijacked" not in done.stderr
    report = json.loads(done.stdout)
    # the search started beside the launcher: its ../lib is the install's lib
    assert str(install / "lib") in report["available"]


def _throwaway_superfluid(root: Path) -> Path:
    """A fresh virtual environment whose ``superfluid`` is this checkout (a .pth naming our site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "superfluid-checkout.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    script = root / "bin" / "superfluid"
    script.write_text(f"#!{python}\nimport sys\nfrom superfluid.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return script


def test_an_install_survives_the_environment_that_made_it_being_deleted(tmp_path: Path, cli_home: Home,
                                                                          server: ReleaseServer) -> None:
    made_with = _throwaway_superfluid(tmp_path / "old-venv")
    env = {**cli_home.env, "PATH": SYSTEM_PATH}
    done = cli.run(made_with, "runtime", "install", "basert", "--mirror", server.mirror_url, env=env)
    assert done.code == 0, done.stderr
    launcher = cli_home.basert / "0.4.0-cpu" / "bin" / "superfluid-worker-basert"
    assert str(tmp_path / "old-venv") in launcher.read_text()  # named, as the last resort only
    shutil.rmtree(tmp_path / "old-venv")

    # the daemon runs the worker with a superfluid on PATH: it answers from the install's own lib
    on_path = {**env, "PATH": f"{_linked_superfluid(tmp_path / 'bin')}:{SYSTEM_PATH}"}
    check = cli.run(launcher, "check", env=on_path, timeout=60)
    assert check.code == 0, check.stderr
    report = json.loads(check.stdout)
    assert report["available"] is True and report["library"].startswith(str(cli_home.basert / "0.4.0-cpu" / "lib"))

    # another superfluid asking the install's worker names its own Python: no PATH needed
    other = {**env, "SUPERFLUID_WORKER_BASERT": str(launcher)}
    rows = cli.run("superfluid", "runtimes", "--json", env=other, timeout=60)
    row = next(r for r in json.loads(rows.stdout) if r["id"] == "basert")
    assert (row["state"], row["ready"]) == ("ready", True), rows.stderr

    # with no superfluid anywhere: one line naming the command that restores it
    alone = cli.run(launcher, "check", env=env, timeout=60)
    assert alone.code == 127
    assert "`superfluid runtime repair basert 0.4.0-cpu` rewrites this launcher" in alone.stderr


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads the process table from /proc (Linux)")
def test_ps_names_the_installed_worker_as_its_command(cli_home: Home, server: ReleaseServer) -> None:
    """Issue 35, item 19: ``superfluid serve``'s basert worker showed in ``ps`` as a long ``python -c
    '...'`` program; it shows as ``python <install>/bin/superfluid-worker-basert serve ...``, as a
    console script does, and its ``comm`` (``ps -e``, ``top``, ``pgrep``) is the worker's name."""
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url).code == 0
    model = native_cache() / "basert" / "models" / "tiny.base"
    served = cli_home.popen("serve", "--model", str(model), "--port", "0")
    try:
        assert served.stdout is not None
        ready = served.stdout.readline()
        assert " serves tiny.base on http://" in ready, served.stderr.read() if served.stderr else ""
        (worker,) = _children(served.pid)
        argv = Path(f"/proc/{worker}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        launcher = cli_home.basert / "0.4.0-cpu" / "bin" / "superfluid-worker-basert"
        assert [a.decode() for a in argv[1:3]] == [str(launcher.resolve()), "serve"], argv
        assert b"-c" not in argv and b"import" not in b" ".join(argv)
        assert Path(f"/proc/{worker}/comm").read_text().strip() == "superfluid-worker-basert"[:15]
    finally:
        served.terminate()
        served.wait(timeout=30)
