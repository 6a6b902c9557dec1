"""``installer/home/launcher``: an install's worker launcher hands its own path to the worker as argv[0],
never imports from the working directory, runs the adapter's main by default; and whether a file is,
byte for byte, the launcher this superfluid writes (what ``serve`` may start before it judges)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from superfluid.installer.home.launcher import is_written_by_us, launcher_argv, launcher_script, write_worker_launcher
from superfluid.runtime.kernel.layout import worker_path
from tests.installer.staged import RID

PROBE = "import json, sys\ndef main():\n    print(json.dumps(sys.argv))\n    return 3\n"


@pytest.fixture
def probe_module(tmp_path: Path) -> dict[str, str]:
    """A module ``sfprobe`` whose main prints its argv, importable through PYTHONPATH."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "sfprobe.py").write_text(PROBE)
    return {**os.environ, "PYTHONPATH": str(tmp_path / "mods")}


def test_launcher_hands_its_own_path_as_argv0(tmp_path: Path, probe_module: dict[str, str]) -> None:
    install = tmp_path / "runtimes" / RID / "1.0-cpu"
    install.mkdir(parents=True)
    (tmp_path / "runtimes" / RID / "current").symlink_to("1.0-cpu")
    write_worker_launcher(install, RID, argv=launcher_argv(RID, module="sfprobe"))
    via_current = tmp_path / "runtimes" / RID / "current" / "bin" / f"superfluid-worker-{RID}"
    run = subprocess.run([str(via_current), "check", "--model", "a b.gguf"], capture_output=True, text=True,
                         env=probe_module, timeout=30)
    assert run.returncode == 3, run.stderr  # main's return value is the exit code
    assert json.loads(run.stdout) == [str(install / worker_path(RID)), "check", "--model", "a b.gguf"]


def test_launcher_ignores_modules_in_the_working_directory(tmp_path: Path, probe_module: dict[str, str]) -> None:
    install = tmp_path / "i"
    install.mkdir()
    write_worker_launcher(install, RID, argv=launcher_argv(RID, module="sfprobe"))
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "sfprobe.py").write_text("def main():\n    print('hijacked')\n")
    run = subprocess.run([str(install / worker_path(RID))], capture_output=True, text=True, cwd=tmp_path / "cwd",
                         env=probe_module, timeout=30)
    assert run.returncode == 3 and "hijacked" not in run.stdout


def test_default_worker_command_runs_the_adapter_main() -> None:
    argv = launcher_argv("basert")
    assert argv[0] == sys.executable and argv[1] in ("-P", "-I") and argv[2] == "-c"
    assert "from superfluid.runtime.basert.worker import main" in argv[3]


def _written(tmp_path: Path) -> Path:
    return write_worker_launcher(tmp_path / "install", "llamacpp")


@pytest.mark.parametrize(("change", "ours"), [
    pytest.param(None, True, id="as-written"),
    pytest.param("append", False, id="a-line-added"),
    pytest.param("edit", False, id="one-character"),
    pytest.param("other-runtime", False, id="another-runtime's"),
    pytest.param("other-python", False, id="made-by-another-python"),
    pytest.param("link", False, id="a-link-to-it"),
    pytest.param("directory", False, id="a-directory"),
    pytest.param("fifo", False, id="a-fifo"),
    pytest.param("missing", False, id="missing"),
    pytest.param("huge", False, id="huge"),
])
def test_only_the_launcher_this_superfluid_writes_is_ours(tmp_path: Path, change: str | None, ours: bool) -> None:
    path = _written(tmp_path)
    text = path.read_text()
    if change == "append":
        path.write_text(text + "echo hi\n")
    elif change == "edit":
        path.write_text(text.replace("import os, sys", "import os,  sys", 1))
    elif change == "other-runtime":
        path.write_text(launcher_script("basert"))
    elif change == "other-python":
        path.write_text(launcher_script("llamacpp", made_by="/opt/other/python3"))
    elif change == "link":
        real = tmp_path / "real"
        path.rename(real)
        path.symlink_to(real)
    elif change == "directory":
        path.unlink()
        path.mkdir()
    elif change == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif change == "missing":
        path.unlink()
    elif change == "huge":
        path.write_text(text + "#" * (1 << 20))
    assert is_written_by_us(str(path), "llamacpp") is ours
