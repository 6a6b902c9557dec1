"""Fixtures of the release CI tests: the real ``minisign``, a key pair it made, the ``ci/`` steps run
as subprocesses, and one ``ci/pack`` run shared by every test that reads its output (it builds an
sdist and a wheel and installs the wheel into a fresh venv: tens of seconds, so it runs once)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import cli
from tests.conftest import ROOT

CI = ROOT / "ci"


def minisign() -> str:
    """The real ``minisign`` (Debian's package; ``.ci/run`` installs it)."""
    found = shutil.which("minisign")
    if found is None:
        pytest.fail("minisign is not installed: `apt-get install minisign` (.ci/run installs it)")
    return found


def run_minisign(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([minisign(), *args], input=stdin, capture_output=True, text=True, timeout=120,
                          check=False, stdin=None if stdin is not None else subprocess.DEVNULL)


@dataclass(frozen=True)
class KeyPair:
    """A key pair made by the real ``minisign -G -W``, outside the repository."""

    secret: Path
    public: Path

    @property
    def secret_line(self) -> str:
        """The secret key's base64 line: what must never leak."""
        return self.secret.read_text().splitlines()[1]

    @property
    def key_id(self) -> str:
        # minisign's comment drops leading zeros (%llX); we print the id's 16 digits
        return self.public.read_text().splitlines()[0].rsplit(" ", 1)[1].zfill(16)


def make_key_pair(directory: Path) -> KeyPair:
    directory.mkdir(parents=True, exist_ok=True)
    pair = KeyPair(directory / "minisign.key", directory / "minisign.pub")
    done = run_minisign("-G", "-W", "-p", str(pair.public), "-s", str(pair.secret))
    assert done.returncode == 0, done.stderr
    return pair


@pytest.fixture(scope="session")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_key_pair(tmp_path_factory.mktemp("keys"))


def ci_env(**extra: str) -> dict[str, str]:
    """The caller's environment for a ``ci/`` step: the test venv's python, no key unless given."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUPERFLUID_SIGNING_KEY", "SUPERFLUID_SIGNING_KEY_FILE", "SOURCE_DATE_EPOCH")}
    env["SUPERFLUID_CI_PYTHON"] = cli.script("python")
    env.update(extra)
    return env


def run_ci(step: str, *args: str, env: Mapping[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``ci/<step>`` as the workflow does."""
    return subprocess.run([str(CI / step), *args], env=dict(env), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False, cwd=str(ROOT))


@dataclass(frozen=True)
class Packed:
    """One ``ci/pack --out DIR`` run: its output folder, what it printed, and the key it signed with."""

    out: Path
    done: subprocess.CompletedProcess[str]
    keys: KeyPair

    @property
    def written(self) -> list[Path]:
        return [Path(line) for line in self.done.stdout.splitlines()]

    def artifact(self, suffix: str) -> Path:
        (found,) = [p for p in self.written if p.name.endswith(suffix)]
        return found


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory, key_pair: KeyPair) -> Packed:
    """``ci/pack --out DIR`` once, the key given as CI gives it: its content in SUPERFLUID_SIGNING_KEY."""
    out = tmp_path_factory.mktemp("pack") / "dist"
    done = run_ci("pack", "--out", str(out), env=ci_env(SUPERFLUID_SIGNING_KEY=key_pair.secret.read_text()))
    assert done.returncode == 0, done.stderr
    return Packed(out, done, key_pair)
