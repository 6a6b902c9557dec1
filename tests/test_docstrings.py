"""Module docstrings say what the module is for, in a line or two, and point to docs/ only."""

from __future__ import annotations

import ast
import re

import pytest

#: the package's top folders (tests/ and benchmarks/ are not the package)
PACKAGE = ("runtime", "installer", "manifest", "superfluid")
MAX_LINES = 3
#: references to texts the checkout does not have: the SPEC, the notes, the issue tracker
FOREIGN = re.compile(r"SPEC\s*§|\bnotes/|\bnotes §|\bissue \d+")


def _faults(source: str) -> list[str]:
    """What is wrong with the module docstring of ``source``: too long, or naming a text we do not ship."""
    doc = ast.get_docstring(ast.parse(source))
    if doc is None:
        return []
    faults = []
    lines = doc.strip().splitlines()
    if len(lines) > MAX_LINES:
        faults.append(f"{len(lines)} lines (at most {MAX_LINES})")
    faults += [f"names {m.group(0)!r}" for m in FOREIGN.finditer(doc)]
    return faults


@pytest.mark.parametrize(("source", "faulty"), [
    pytest.param('"""One line."""\n', False, id="one-line"),
    pytest.param('"""One line.\n\nSee docs/install.md, "The cache".\n"""\n', False, id="line-and-pointer"),
    pytest.param('import os\n', False, id="no-docstring"),
    pytest.param('"""One.\n\nTwo.\nThree.\n"""\n', True, id="four-lines"),
    pytest.param('"""The rule (SPEC §4.1)."""\n', True, id="spec-section"),
    pytest.param('"""The names (notes/superfluid-contract.md §2.1)."""\n', True, id="a-note"),
    pytest.param('"""The plans (notes §3.3)."""\n', True, id="notes-section"),
    pytest.param('"""The registry as a mirror (issue 23)."""\n', True, id="an-issue"),
    pytest.param('def f():\n    """Long\n\n\n\nand SPEC §1."""\n', False, id="a-function-is-not-the-module"),
])
def test_the_rule_finds_a_long_or_foreign_docstring(source: str, faulty: bool) -> None:
    assert bool(_faults(source)) is faulty


def test_every_module_docstring_is_short_and_points_to_docs_only() -> None:
    from tests.conftest import ROOT

    files = [p for top in PACKAGE for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(files) > 50  # the package was found
    faulty = {}
    for path in files:
        found = _faults(path.read_text(encoding="utf-8"))
        if found:
            faulty[path.relative_to(ROOT).as_posix()] = found
    assert faulty == {}, "a module docstring is one line on what the module is for, and may point to docs/"


def test_every_docs_section_a_module_docstring_names_exists() -> None:
    from tests.conftest import ROOT

    pointer = re.compile(r'See (docs/[\w.-]+\.md), "([^"]+)"\.')
    missing = []
    for top in PACKAGE:
        for path in sorted((ROOT / top).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            for page, section in pointer.findall(doc):
                text = (ROOT / page).read_text(encoding="utf-8") if (ROOT / page).is_file() else ""
                headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
                if section not in headings:
                    missing.append(f"{path.relative_to(ROOT).as_posix()}: {page}, {section!r}")
    assert missing == []
