"""basert ready (tests/runtime/ready.py): the reference engine 0.4.0 named by ``BASERT_LIB``, and its tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.ready import Ready


def ready(request: pytest.FixtureRequest, folder: Path) -> Ready:
    engines: Path = request.getfixturevalue("engines")
    return Ready({"BASERT_LIB": str(engines / "0.4.0")}, engines / "models" / "tiny.base")
