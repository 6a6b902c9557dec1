"""Fixtures for issue 14's hardening tests: a home with two real baseRT installs (0.3.1-cpu and
0.4.0-cpu, both ABI 1) made once by the real CLI from a mirror directory and copied per test, and
the real ``superfluid`` run with a short timeout (a hang fails the test in seconds, never stalls CI).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import cli
from tests import conftest as shared
from tests.cli import Run
from tests.copied_home import copy_home

#: seconds any one command of these tests may take (installs from a local mirror take ~0.5 s)
TIMEOUT = 20.0


@dataclass
class Home(shared.Home):
    """A SUPERFLUID_HOME and the mirror it repairs from; ``sf`` runs the CLI with a short timeout."""

    mirror: Path

    def sf(self, *argv: str, timeout: float = TIMEOUT, env: dict[str, str] | None = None) -> Run:
        try:
            done = cli.run("superfluid", *argv, env=env or self.env, timeout=timeout, new_session=True)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"`superfluid {' '.join(argv)}` hung for {timeout:g} s: {e.stderr!r}")
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def repair_flags(self) -> list[str]:
        return ["--mirror", str(self.mirror)]


def tree_digest(path: Path) -> str:
    """A digest of a directory tree's names, kinds and bytes (links by target): unchanged or not."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            p = os.path.join(root, name)
            h.update(os.path.relpath(p, path).encode() + b"\0")
            if os.path.islink(p):
                h.update(b"L" + os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(b"F" + f.read())
            else:
                h.update(b"?")
    return h.hexdigest()


@pytest.fixture(scope="session")
def mirror_dir(tmp_path_factory: pytest.TempPathFactory, engines: Path) -> Path:
    from tests.end_to_end import releases

    return releases.make_mirror(tmp_path_factory.mktemp("mirror"))


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Path:
    path = tmp_path_factory.mktemp("template") / "home"
    path.mkdir()
    h = Home(path, cli.environment(path), mirror_dir)
    for version in ("0.3.1", "0.4.0"):
        run = h.sf("runtime", "install", "basert", "--mirror", str(mirror_dir), "--version", version)
        assert run.code == 0, run.stderr
    assert h.current() == "0.4.0-cpu"
    return path


@pytest.fixture
def installed_home(tmp_path: Path, template: Path, mirror_dir: Path) -> Home:
    """A copy of the home with basert 0.3.1-cpu and 0.4.0-cpu installed (current: 0.4.0-cpu)."""
    path = tmp_path / "home"
    copy_home(template, path)  # as runtime verify leaves a copy: its installs ready, not changed
    return Home(path, cli.environment(path), mirror_dir)
