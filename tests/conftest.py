"""Shared test fixtures: the native artifact cache and an isolated SUPERFLUID_HOME."""

from __future__ import annotations

import os
from pathlib import Path

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
