"""Fixtures of the serve tests that stand in for the face in the test process."""

from __future__ import annotations

import sys

import pytest

from tests import cli


@pytest.fixture
def as_the_face(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is the face: ``superfluid`` beside its workers is what it runs (``shipped_dirs``)."""
    monkeypatch.setattr(sys, "argv", [str(cli.script("superfluid"))])
