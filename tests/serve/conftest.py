"""Fixtures of the ``superfluid serve`` tests: the real libllama builds and the tiny GGUF models,
made by the same scripts as the llama.cpp tests' (``tests/native``; cached between runs)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


def _script(name: str) -> ModuleType:
    key = f"_sf_native_{name}"  # the llama.cpp tests load them under the same name: one module each
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "tests" / "native" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def gguf() -> dict[str, Path]:
    """The standard tiny GGUF models, by file name."""
    return dict(_script("make_gguf").write_standard())


@pytest.fixture(scope="session", params=["v1", "v2"])
def llama_lib(request: pytest.FixtureRequest) -> Path:
    """The directory of each real libllama in turn (built once, then cached)."""
    build = _script("build_libllama")
    try:
        return Path(build.build(str(request.param)))
    except build.BuildFailed as e:
        if os.environ.get("CI"):
            pytest.fail(f"building libllama {request.param} failed on CI: {e}")
        pytest.skip(f"cannot build libllama {request.param} here: {e}")
