"""Fixtures for the basert tests: the reference engine's variants, built once per session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from basert_helpers import build_engines, native_cache


@pytest.fixture(scope="session")
def engines() -> Path:
    """``<cache>/basert``: one directory per variant holding its libbaseRT, and ``models/tiny.base``."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.fail("no C compiler (cc): the reference engine cannot be built")
    done = build_engines(native_cache())
    if done.returncode != 0:
        pytest.fail(f"tests/engines/basert/build.sh failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return native_cache() / "basert"


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
