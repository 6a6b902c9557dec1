"""Shared test fixtures: the native artifact cache and an isolated SUPERFLUID_HOME; and the check of
a worker's ``install`` answer."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))


def native_cache() -> Path:
    return Path(os.environ.get("SUPERFLUID_NATIVE_CACHE") or ROOT / ".cache" / "native")


@pytest.fixture
def sf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh SUPERFLUID_HOME for one test, set in the environment."""
    home = tmp_path / "sfhome"
    home.mkdir()
    monkeypatch.setenv("SUPERFLUID_HOME", str(home))
    for name in ("BASERT_LIB", "SUPERFLUID_LLAMA_LIB", "SUPERFLUID_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("SUPERFLUID_WORKER_"):
            monkeypatch.delenv(name, raising=False)
    return home


def printed_receipt(done: subprocess.CompletedProcess[str], into: Path) -> dict[str, Any]:
    """The receipt a worker's ``install --into INTO`` answered, checked: exit 0, nothing on stderr,
    one line on stdout equal to ``INTO/runtime.json`` (written pretty, newline-terminated), and valid
    against ``schemas/runtime.schema.json``."""
    from superfluid.runtime.schema import errors

    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout.count("\n") == 1
    printed = json.loads(done.stdout)
    text = (into / "runtime.json").read_text()
    written: dict[str, Any] = json.loads(text)
    assert printed == written and text.endswith("}\n")
    assert errors(written, "runtime") == []
    return written


@dataclass
class Run:
    """One finished ``superfluid`` run."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)
