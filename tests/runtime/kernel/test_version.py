"""This superfluid's one version number (runtime/kernel/version.py)."""

from __future__ import annotations

from pathlib import Path

import tomllib

import superfluid
from superfluid.runtime.kernel.version import VERSION

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_is_the_distribution_s() -> None:
    assert VERSION == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_face_says_the_same_version() -> None:
    assert superfluid.__version__ == VERSION
