"""Fixtures for the install tests: fixture baseRT releases on the loopback server, a fresh home,
and the real ``superfluid`` command run as a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VENV_BIN, Run
from tests.install import releases
from tests.release_server import ReleaseServer


@dataclass
class Home:
    """A fresh SUPERFLUID_HOME and the environment that names it."""

    path: Path
    env: dict[str, str]

    @property
    def basert(self) -> Path:
        return self.path / "runtimes" / "basert"

    def receipt(self, install: str) -> dict[str, Any]:
        return json.loads((self.basert / install / "runtime.json").read_text())

    def current(self) -> str | None:
        try:
            return os.readlink(self.basert / "current")
        except OSError:
            return None

    def installs(self) -> list[str]:
        if not self.basert.is_dir():
            return []
        return sorted(n for n in os.listdir(self.basert) if not n.startswith(".") and n not in ("current", "pinned"))

    def leftovers(self) -> list[str]:
        if not self.basert.is_dir():
            return []
        return sorted(n for n in os.listdir(self.basert) if n.startswith(".") and n != ".install.lock")

    def superfluid(self, *argv: str, timeout: float = 120) -> Run:
        done = subprocess.run([str(VENV_BIN / "superfluid"), *argv], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)
        return Run(done.returncode, done.stdout, done.stderr)

    def popen(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen([str(VENV_BIN / "superfluid"), *argv], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture(scope="session")
def engines() -> Path:
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.fail("no C compiler (cc): the reference engine cannot be built")
    return releases.build_engines()


@pytest.fixture
def server(engines: Path) -> Iterator[ReleaseServer]:
    """The loopback server with the standard fixture releases of baseRT (0.2.6 … 0.5.0)."""
    with ReleaseServer() as s:
        releases.publish(s)
        yield s


@pytest.fixture
def home(tmp_path: Path) -> Home:
    path = tmp_path / "sfhome"
    path.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SUPERFLUID_", "BASERT_")) and k not in ("GITHUB_TOKEN", "GH_TOKEN", "CI")}
    env["SUPERFLUID_HOME"] = str(path)
    env["SUPERFLUID_NATIVE_CACHE"] = os.environ.get("SUPERFLUID_NATIVE_CACHE", "")
    if not env["SUPERFLUID_NATIVE_CACHE"]:
        del env["SUPERFLUID_NATIVE_CACHE"]
    return Home(path, env)
