"""One table of exit codes (issue 42, design point 4): every error type maps to its code in
``superfluid.exits``, docs/cli.md's "Exit codes" table is that table, and the face exits by it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from superfluid import cli as face
from superfluid.exits import EXIT_CODES, INTERRUPTED, MEANINGS, exit_code
from superfluid.runtime.kernel.errors import (
    AbiRefused,
    BadFile,
    ModelLoadFailed,
    NotServable,
    SuperfluidError,
    UsageError,
    WorkerFailed,
)
from tests import cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _docs_table() -> dict[int, str]:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("\n## Exit codes\n"):]
    section = section[:section.index("\n## ", 1)]
    return {int(code): meaning for code, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_the_docs_table_is_the_table() -> None:
    assert _docs_table() == MEANINGS


def test_every_code_the_table_gives_has_its_meaning() -> None:
    assert {code for _, code in EXIT_CODES} <= set(MEANINGS) and 0 in MEANINGS


@pytest.mark.parametrize(("error", "code"), [
    (UsageError("x"), 2), (NotServable("x"), 4), (ModelLoadFailed("x"), 3), (SuperfluidError("x"), 1),
    (BadFile("/f", "broken"), 1), (AbiRefused("/l", 2, 1), 1), (WorkerFailed("w", "hung"), 1),
    (OSError(28, "No space left on device"), 1), (KeyboardInterrupt(), INTERRUPTED), (RuntimeError("x"), 1),
])
def test_each_error_type_exits_with_its_code(error: BaseException, code: int) -> None:
    assert exit_code(error) == code


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
