"""Fixtures of the serve tests that stand in for the face in the test process."""

from __future__ import annotations

import sys
import threading

import pytest

from tests import cli


@pytest.fixture
def as_the_face(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is the face: ``superfluid`` beside its workers is what it runs (``shipped_dirs``)."""
    monkeypatch.setattr(sys, "argv", [str(cli.script("superfluid"))])


@pytest.fixture
def no_other_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process counts as running no thread but its own: the suite's servers idle on threads of their
    own, which a face never has (``worker_fork.may_fork`` refuses a face with one)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
