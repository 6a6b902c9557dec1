"""Fixtures for the llama.cpp tests: real libllama builds (v1, v2) and tiny GGUF models.

The libraries are built by ``tests/native/build_libllama.py`` into the native cache (about 80 s
each on 2 cores the first time, then nothing while the pinned inputs are unchanged). A test that
needs one is skipped only when the build itself cannot run here (no compiler, no cmake, no network
to fetch the sdist) and never on CI (``CI`` set): there it fails.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

NATIVE = ROOT / "tests" / "native"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_sf_native_{name}", NATIVE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build_libllama = _script("build_libllama")
make_gguf = _script("make_gguf")


def _build(layout: str) -> Path:
    try:
        return build_libllama.build(layout)
    except build_libllama.BuildFailed as e:
        if os.environ.get("CI"):
            pytest.fail(f"building libllama {layout} failed on CI: {e}")
        pytest.skip(f"cannot build libllama {layout} here: {e}")


@pytest.fixture(scope="session")
def lib_v1_dir() -> Path:
    """The directory of the real v1 libllama (llama.cpp b11312)."""
    return _build("v1")


@pytest.fixture(scope="session")
def lib_v2_dir() -> Path:
    """The directory of the real v2 libllama (llama.cpp b11549)."""
    return _build("v2")


@pytest.fixture(scope="session", params=["v1", "v2"])
def lib_dir(request: pytest.FixtureRequest) -> Path:
    """Each real libllama in turn."""
    return _build(request.param)


@pytest.fixture(scope="session")
def models() -> dict[str, Path]:
    """The standard tiny GGUF models, by file name (``always-the.gguf``...)."""
    return make_gguf.write_standard()


@pytest.fixture(scope="session")
def the_token() -> int:
    """The id of ``▁the`` in the tiny vocabulary (what the always-the models predict)."""
    return int(make_gguf.token_id("▁the"))
