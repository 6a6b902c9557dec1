"""Fixtures for the basert tests: the tiny model of the reference engine (whose variants, ``engines``,
come from ``tests/conftest.py``) and an environment for worker subprocesses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(engines: Path) -> Path:
    return engines / "models" / "tiny.base"


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """An environment for worker subprocesses: ours without BASERT_LIB or the engine's test knobs,
    with an empty SUPERFLUID_HOME."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("BASERT_LIB", "BASERT_REF_DEVICE_BUDGET", "BASERT_REF_GET_CONFIG_MARKER")}
    home = tmp_path / "home"
    home.mkdir()
    env["SUPERFLUID_HOME"] = str(home)
    return env
