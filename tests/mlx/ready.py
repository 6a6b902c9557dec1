"""mlx ready (tests/runtime/ready.py): a Mac's host facts and an MLX environment that answers the probe
(``environments.venv``); no model, for MLX serves on a Mac only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mlx.environments import GOOD, MAC, venv
from tests.runtime.ready import Ready


def ready(request: pytest.FixtureRequest, folder: Path) -> Ready:
    return Ready({"SUPERFLUID_MLX_VENV": str(venv(folder / "mlx-env", json.dumps(GOOD))), **MAC}, None)
