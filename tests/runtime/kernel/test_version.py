"""This superfluid's one version number (runtime/kernel/version.py)."""

from __future__ import annotations

import tomllib

from superfluid.runtime.kernel.version import VERSION
from tests.conftest import ROOT


def test_the_version_is_the_distribution_s() -> None:
    assert VERSION == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
