"""Fixtures for the install tests: the standard fixture baseRT releases on the loopback server (the
home, ``cli_home``, and the server itself come from ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from tests.conftest import Home
from tests.release_server import ReleaseServer

__all__ = ["Home"]


@pytest.fixture
def two(cli_home: Home, server: ReleaseServer) -> Home:
    """basert 0.3.1-cpu and 0.4.0-cpu installed from the loopback mirror (current: 0.4.0-cpu)."""
    for version in ("0.3.1", "0.4.0"):
        run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, "--version", version)
        assert run.code == 0, run.stderr
    assert cli_home.current() == "0.4.0-cpu"
    return cli_home
