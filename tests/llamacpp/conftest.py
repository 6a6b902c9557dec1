"""Fixtures for the llama.cpp tests (the real libllama builds and the tiny GGUF models come from
``tests/conftest.py``): the native scripts as modules, and the tiny vocabulary's ``▁the``."""

from __future__ import annotations

import pytest

from tests.conftest import native_script

build_libllama = native_script("build_libllama")
make_gguf = native_script("make_gguf")


@pytest.fixture(scope="session")
def the_token() -> int:
    """The id of ``▁the`` in the tiny vocabulary (what the always-the models predict)."""
    return int(make_gguf.token_id("▁the"))
