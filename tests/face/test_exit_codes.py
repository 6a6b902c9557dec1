"""The face exits by the one table of exit codes (``runtime.kernel.exits``, tested in
tests/runtime/kernel/test_exits.py), and the same fault has the same code on every command (issue 42,
design point 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid import cli as face
from superfluid.runtime.kernel.exits import EXIT_CODES, exit_code
from tests import cli


def test_the_face_reads_this_table() -> None:
    assert face.EXIT_CODES is EXIT_CODES and face.exit_code is exit_code


@pytest.mark.parametrize(("argv", "says"), [
    pytest.param(["runtimes", "{tmp}"], "is a directory, and no runtime reads it as a model",
                 id="runtimes-a-directory"),
    pytest.param(["lock", "--backend", "nope", "--offline"], "--backend 'nope'", id="lock-backend-nope"),
    pytest.param(["runtime", "install", "basert", "--backend", "nope", "--dry-run"], "--backend 'nope'",
                 id="install-backend-nope"),
    pytest.param(["runtime", "install", "llamacpp", "--backend", "cuda;rm", "--dry-run"], "--backend 'cuda;rm'",
                 id="install-backend-not-a-name"),
])
def test_the_same_fault_is_exit_2_on_every_command(tmp_path: Path, argv: list[str], says: str) -> None:
    """Item 26: ``runtimes /tmp`` exited 1 where docs/cli.md says 2; ``install --backend nope`` 1 where
    ``lock --backend nope`` is 2."""
    env = cli.environment(tmp_path / "home", SUPERFLUID_GITHUB_API="http://127.0.0.1:9")
    done = cli.run("superfluid", *(a.format(tmp=tmp_path) for a in argv), env=env, timeout=60)
    assert done.code == 2 and says in done.stderr, done.stderr
