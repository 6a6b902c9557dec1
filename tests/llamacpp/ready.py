"""llamacpp ready (tests/runtime/ready.py): the real v2 libllama named by ``SUPERFLUID_LLAMA_LIB``, and a
tiny GGUF model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.ready import Ready


def ready(request: pytest.FixtureRequest, folder: Path) -> Ready:
    lib: Path = request.getfixturevalue("libllama_v2")
    models: dict[str, Path] = request.getfixturevalue("gguf_models")
    return Ready({"SUPERFLUID_LLAMA_LIB": str(lib)}, models["always-the.gguf"])
