"""A SUPERFLUID_HOME that cannot hold installs (issue 14, item 7): a file, a path under a file, a
directory on a read-only file system, or one this user cannot write. A command that changes the
home exits 1 with a message naming the path, before anything (no traceback); a command that only
reads answers from what it can read, with one warning.

The read-only file system is a real one: the home bind-mounted read-only in a mount namespace of
its own (``unshare``). The unwritable home is a real one too: as root the commands run as
``nobody`` (``setpriv``), otherwise the directory's mode forbids writing.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import cli
from tests.cli import Run
from tests.copied_home import verified
from tests.faults.conftest import TIMEOUT, Home, tree_digest

CHANGING = [
    ["runtime", "install", "basert", "--version", "0.3.1"],
    ["runtime", "repair", "basert"],
    ["runtime", "update", "basert"],
    ["runtime", "use", "basert", "--auto"],
    ["runtime", "remove", "basert", "0.3.1-cpu"],
]
READING = [["runtimes", "--json"], ["runtime", "versions", "basert", "--json"], ["runtime", "options", "llamacpp"],
           ["compat", "--json"]]


def _run(argv: list[str], env: dict[str, str], prefix: list[str] | None = None) -> Run:
    try:
        done = cli.run("superfluid", *argv, env=env, timeout=TIMEOUT, prefix=prefix or [])
    except subprocess.TimeoutExpired:
        pytest.fail(f"superfluid {' '.join(argv)} hung")
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _mirror_flags(argv: list[str], mirror: Path) -> list[str]:
    return [*argv, "--mirror", str(mirror)] if argv[1] in ("install", "repair", "update") else argv


def _assert_refused(run: Run, where: Path, fault: str) -> None:
    assert run.code == 1, run.stderr
    assert f"SUPERFLUID_HOME ({where})" in run.stderr and fault in run.stderr, run.stderr


def _assert_answers_with_one_warning(run: Run, where: Path) -> None:
    assert run.code == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("superfluid: warning: ")]
    assert len(warnings) == 1 and f"SUPERFLUID_HOME ({where})" in warnings[0], run.stderr


@pytest.mark.parametrize("under", [False, True], ids=["a-file", "under-a-file"])
def test_a_home_that_is_a_file(tmp_path: Path, mirror_dir: Path, under: bool) -> None:
    afile = tmp_path / "home-file"
    afile.write_text("not a directory\n")
    where = afile / "sub" if under else afile
    env = cli.environment(where)
    for argv in CHANGING:
        _assert_refused(_run(_mirror_flags(argv, mirror_dir), env), where,
                        "cannot be made" if under else "is a file, not a directory")
    for argv in READING:
        _assert_answers_with_one_warning(_run(argv, env), where)
    assert afile.read_text() == "not a directory\n"


def _unshare_prefix() -> list[str] | None:
    """How to run a shell in a mount namespace of its own here (None: this machine does not let us)."""
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        if shutil.which(prefix[0]) is None:
            return None
        probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs none /mnt 2>/dev/null || "
                                "mount -t tmpfs none /tmp"], capture_output=True, timeout=10)
        if probe.returncode == 0:
            return prefix
    return None


def test_a_home_on_a_read_only_file_system(installed_home: Home, tmp_path: Path) -> None:
    prefix = _unshare_prefix()
    if prefix is None:
        pytest.skip("no mount namespace can be made here (unshare -m and -rm both refused)")
    before = tree_digest(installed_home.path / "runtimes")
    script = f"mount --bind {shlex.quote(str(installed_home.path))} {shlex.quote(str(installed_home.path))} && " \
             f"mount -o remount,bind,ro {shlex.quote(str(installed_home.path))} && exec \"$@\""
    for argv in CHANGING:
        run = _run(_mirror_flags(argv, installed_home.mirror), installed_home.env, [*prefix, "sh", "-c", script, "sh"])
        _assert_refused(run, installed_home.path, "is on a read-only file system")
    for argv in READING:
        run = _run(argv, installed_home.env, [*prefix, "sh", "-c", script, "sh"])
        _assert_answers_with_one_warning(run, installed_home.path)
    rows = _run(["runtimes", "--json"], installed_home.env, [*prefix, "sh", "-c", script, "sh"])
    assert next(r for r in rows.json() if r["id"] == "basert")["state"] == "ready"  # read what it could
    assert tree_digest(installed_home.path / "runtimes") == before


@pytest.fixture
def unwritable(template: Path, mirror_dir: Path) -> Iterator[tuple[Home, list[str]]]:
    base = Path(tempfile.mkdtemp(prefix="sf-unwritable-"))
    try:
        os.chmod(base, 0o755)
        path = base / "home"
        shutil.copytree(template, path, symlinks=True)
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                p = os.path.join(root, name)
                if not os.path.islink(p):
                    os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
        os.chmod(path, 0o755)
        verified(path)  # as runtime verify leaves a copy: its installs ready, not changed
        prefix: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: no unprivileged user to run as")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        else:
            for root, dirs, _ in os.walk(path):
                for d in dirs:
                    os.chmod(os.path.join(root, d), 0o555)
            os.chmod(path, 0o555)
        yield Home(path, cli.environment(path), mirror_dir), prefix
    finally:
        for root, dirs, _ in os.walk(base):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_a_home_this_user_cannot_write(unwritable: tuple[Home, list[str]]) -> None:
    home, prefix = unwritable
    env = dict(home.env, HOME=str(home.path.parent))
    before = tree_digest(home.path / "runtimes")
    for argv in CHANGING:
        _assert_refused(_run(_mirror_flags(argv, home.mirror), env, prefix), home.path, "is not writable")
    for argv in READING:
        _assert_answers_with_one_warning(_run(argv, env, prefix), home.path)
    assert tree_digest(home.path / "runtimes") == before
