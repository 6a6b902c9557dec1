"""Each engine ready, for the tests that run every registered engine (the conformance kit, the worker
contract's table): ``tests/<id>/ready.py``'s ``ready(request, folder)`` gives the variables that make it
ready and a model it serves (None where it does not serve here), so that those tests name no engine."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import NamedTuple

import pytest

__all__ = ["Ready", "ready"]


class Ready(NamedTuple):
    """What makes an engine ready here, and a model of its format that it serves."""

    variables: dict[str, str]
    model: Path | None


def ready(runtime_id: str, request: pytest.FixtureRequest, folder: Path) -> Ready:
    """``tests/<runtime_id>/ready.py``'s answer (its fixtures asked through ``request``; files it makes
    go in ``folder``)."""
    answer: Ready = import_module(f"tests.{runtime_id}.ready").ready(request, folder)
    return answer
