"""scripts/system-tools: the README's commands install the system tools they need, or stop first with the
one command that does (run against a PATH that holds only what each case gives it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system-tools"
TEST_PACKAGES = ["build-essential", "cmake", "strace", "minisign", "zsh", "fish", "docker-registry"]
TOOLS = {"build-essential": "cc", "cmake": "cmake", "strace": "strace", "minisign": "minisign", "zsh": "zsh",
         "fish": "fish", "docker-registry": "docker-registry"}


def _bin(tmp_path: Path, *, uid: int, present: tuple[str, ...] = ()) -> Path:
    """A PATH folder with bash, tr and a fake ``id``; a fake ``apt-get`` that records its arguments and, on
    install, makes each named package's tool; and the tools in ``present``."""
    where = tmp_path / "bin"
    where.mkdir()
    for tool in ("bash", "tr"):
        found = shutil.which(tool)
        assert found, tool
        (where / tool).symlink_to(found)
    _script(where / "id", f"echo {uid}")
    tools = " ".join(f"{p}={t}" for p, t in TOOLS.items())
    _script(where / "apt-get", f'echo "$*" >> {tmp_path}/apt.log\n'
                               f'[ "$1" = install ] || exit 0\n'
                               f'for pair in {tools}; do for arg in "$@"; do\n'
                               f'  [ "$arg" = "${{pair%%=*}}" ] && printf "#!/bin/sh\\n" > {where}/"${{pair#*=}}" '
                               f'&& chmod +x {where}/"${{pair#*=}}"\n'
                               f'done; done; exit 0')
    for tool in present:
        _script(where / tool, "exit 0")
    return where


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(bin_dir: Path, purpose: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir), "PYTHON": sys.executable, "HOME": str(bin_dir.parent)}
    return subprocess.run([str(bin_dir / "bash"), str(SCRIPT), purpose], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def _apt_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_without_root_or_sudo_it_stops_with_the_one_command_that_installs_them(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path, uid=1000, present=("cc", "cmake", "strace"))
    done = _run(bin_dir, "test")
    assert done.returncode == 1
    assert "sudo apt-get install -y minisign zsh fish docker-registry" in done.stderr
    assert _apt_log(tmp_path) == []  # nothing was attempted


def test_as_root_it_installs_exactly_what_is_missing(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path, uid=0)
    done = _run(bin_dir, "test")
    assert done.returncode == 0, done.stderr
    assert _apt_log(tmp_path) == ["update -q", "install -y -q " + " ".join(TEST_PACKAGES)]
    assert all((bin_dir / tool).exists() for tool in TOOLS.values())


def test_nothing_missing_runs_nothing(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path, uid=0, present=tuple(TOOLS.values()))
    done = _run(bin_dir, "test")
    assert (done.returncode, done.stderr) == (0, "")
    assert _apt_log(tmp_path) == []


def test_an_install_that_leaves_a_tool_missing_fails(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path, uid=0, present=("cc", "cmake", "strace", "zsh", "fish"))
    _script(bin_dir / "apt-get", f'echo "$*" >> {tmp_path}/apt.log')  # installs nothing
    done = _run(bin_dir, "test")
    assert done.returncode == 1
    assert "still missing: minisign" in done.stderr


@pytest.mark.parametrize(("purpose", "wanted"), [("demo", "build-essential"), ("test", " ".join(TEST_PACKAGES))])
def test_each_command_asks_for_its_own_tools(tmp_path: Path, purpose: str, wanted: str) -> None:
    done = _run(_bin(tmp_path, uid=1000), purpose)
    assert done.returncode == 1
    assert f"scripts/{purpose} needs" in done.stderr
    assert f"sudo apt-get install -y {wanted}\n" in done.stderr


def test_every_readme_command_calls_it_first() -> None:
    for script, purpose in (("test", "test"), ("demo", "demo")):
        lines = [ln for ln in (ROOT / "scripts" / script).read_text().splitlines() if ln.startswith("bash ")]
        assert lines[0] == f"bash scripts/system-tools {purpose}", script
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.parametrize(("args", "code", "says"), [
    pytest.param(["--help"], 0, "scripts/make-mirror DIR", id="help"),
    pytest.param(["-h"], 0, "superfluid runtime install basert --mirror DIR", id="h"),
    pytest.param(["--nope"], 2, "unknown option --nope", id="unknown-option"),
    pytest.param([], 2, "usage: scripts/make-mirror DIR", id="no-dir"),
])
def test_make_mirror_answers_help_and_refuses_a_wrong_line(args: list[str], code: int, says: str,
                                                           tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "make-mirror"), *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path)
    assert done.returncode == code
    assert says in (done.stdout if code == 0 else done.stderr)
    assert list(tmp_path.iterdir()) == []  # nothing made
