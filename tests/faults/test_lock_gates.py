"""Every command that reads a lock reads it through one gate (issue 37, item 2; issue 36, item 5):
a directory, a FIFO or ``/dev/zero`` named as the lock is a usage error naming the path (exit 2),
never a traceback and never a hang; a lock nested 100,000 deep is a bad file named as such (exit 1)
within seconds, never a ``RecursionError``. The real console script, each command that takes a lock."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.conftest import Home

#: each command that reads a lock, with the lock's path put where it takes it
READERS: dict[str, Callable[[str, Path], list[str]]] = {
    "install --locked": lambda lock, _m: ["runtime", "install", "basert", "--locked", lock],
    "mirror sync --lock": lambda lock, m: ["mirror", "sync", str(m), "--lock", lock],
    "mirror verify --lock": lambda lock, m: ["mirror", "verify", str(m), "--lock", lock],
    "mirror push --lock": lambda lock, _m: ["mirror", "push", "oci://127.0.0.1:9/fleet", "--lock", lock],
    "lock --check -o": lambda lock, _m: ["lock", "--check", "-o", lock, "--offline"],
    "runtime gc --lock": lambda lock, _m: ["runtime", "gc", "basert", "--lock", lock, "--dry-run"],
    "cache du --keep-lock": lambda lock, _m: ["cache", "du", "--keep-lock", lock],
    "cache prune --keep-lock": lambda lock, _m: ["cache", "prune", "--keep-lock", lock, "--dry-run"],
}


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo.lock")
    return str(tmp / "fifo.lock")


def _folder(tmp: Path) -> str:
    (tmp / "a-folder").mkdir()
    return str(tmp / "a-folder")


NOT_FILES: dict[str, Callable[[Path], str]] = {"directory": _folder, "fifo": _fifo, "dev-zero": lambda _t: "/dev/zero"}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("kind", sorted(NOT_FILES))
def test_a_lock_that_is_not_a_file_is_a_usage_error_naming_it(installed_home: Home, tmp_path: Path, reader: str,
                                                               kind: str) -> None:
    lock = NOT_FILES[kind](tmp_path)
    began = time.monotonic()
    run = installed_home.sf(*READERS[reader](lock, tmp_path / "mirror"), timeout=15)
    assert time.monotonic() - began < 10
    assert run.code == 2, (run.code, run.stderr)
    assert lock in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_lock_nested_100000_deep_is_refused_as_a_bad_file(installed_home: Home, tmp_path: Path,
                                                            reader: str) -> None:
    lock = tmp_path / "deep.lock"
    lock.write_text('schema = "superfluid-lock/1"\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "mirror").mkdir()  # a mirror there: the lock is what is judged (a missing DIR is exit 2 first)
    began = time.monotonic()
    run = installed_home.sf(*READERS[reader](str(lock), tmp_path / "mirror"), timeout=15)
    assert time.monotonic() - began < 10
    assert run.code == 1, (run.code, run.stderr)
    assert str(lock) in run.stderr and "deep" in run.stderr
    assert "Traceback" not in run.stderr and "RecursionError" not in run.stderr
