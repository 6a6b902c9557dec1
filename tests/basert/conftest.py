"""Fixtures for the basert tests: the tiny model of the reference engine (whose variants, ``engines``,
come from ``tests/conftest.py``) and an environment for worker subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import cli


@pytest.fixture(scope="session")
def tiny_model(engines: Path) -> Path:
    return engines / "models" / "tiny.base"


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """An environment for worker subprocesses: a test run's (no BASERT_LIB or engine test knob), with an
    empty SUPERFLUID_HOME."""
    home = tmp_path / "home"
    home.mkdir()
    return cli.environment(home)
