"""One table of exit codes (issue 42, design point 4): every error type maps to its code in
``runtime.kernel.exits``, and docs/cli.md's "Exit codes" table is that table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from superfluid.runtime.kernel.errors import (
    AbiRefused,
    BadFile,
    ModelLoadFailed,
    NotServable,
    SuperfluidError,
    UsageError,
    WorkerFailed,
)
from superfluid.runtime.kernel.exits import EXIT_CODES, INTERRUPTED, MEANINGS, exit_code

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


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
