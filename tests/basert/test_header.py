"""Our header: the numbers Python reads are the C compiler's (the ctypes mirror of its struct is
tests/basert/test_config.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from basert_helpers import INCLUDE, ROOT, compile_and_run

from superfluid.runtime.basert import header
from superfluid.runtime.kernel.errors import BadFile


def test_requires_is_what_the_compiler_sees(tmp_path: Path) -> None:
    out = compile_and_run(tmp_path, """
        #include <stdio.h>
        #include "baseRT.h"
        int main(void) {
            printf("%d.%d.%d %d %d\\n", BASERT_VERSION_MAJOR, BASERT_VERSION_MINOR, BASERT_VERSION_PATCH,
                   BASERT_ABI_VERSION, BASERT_VERSION);
            return 0;
        }""")
    version, abi, packed = out.split()
    assert header.REQUIRES == {"header": version, "abi": int(abi)}
    assert (header.HEADER_VERSION, header.ABI_VERSION) == (version, int(abi))
    assert int(packed) == (header.FACTS.major << 16) | (header.FACTS.minor << 8) | header.FACTS.patch
    assert header.HEADER_PATH == INCLUDE / "baseRT.h"


def test_the_issue_pair() -> None:
    """Issue 2 states the pair this build drives: header 0.4.0, ABI 1 (and 0.3 unnumbered)."""
    assert header.REQUIRES == {"header": "0.4.0", "abi": 1}
    assert header.UNNUMBERED_LINE == "0.3"


def test_no_number_is_typed_twice() -> None:
    """No loader module holds the header version as a value of its own: they read header.py."""
    modules = ["header", "config", "bindings", "locate", "verdict", "loader", "model", "check", "worker"]
    for name in modules:
        tree = ast.parse((ROOT / "runtime" / "basert" / f"{name}.py").read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docstrings
                    and isinstance(n.value, str) and header.HEADER_VERSION in n.value]
        assert literals == [], name
        assert not re.search(r"ABI_VERSION\s*=\s*\d", (ROOT / "runtime" / "basert" / f"{name}.py").read_text())


GOOD = "#define BASERT_VERSION_MAJOR 1\n#define BASERT_VERSION_MINOR 22\n#define BASERT_VERSION_PATCH 3\n" \
       "  #  define BASERT_ABI_VERSION 7  \n"


@pytest.mark.parametrize(("text", "fault"), [
    pytest.param(GOOD.replace("#define BASERT_VERSION_MINOR 22\n", ""), "BASERT_VERSION_MINOR is not defined",
                 id="missing"),
    pytest.param(GOOD + "#define BASERT_ABI_VERSION 2\n", "BASERT_ABI_VERSION is defined 2 times", id="twice"),
    pytest.param(GOOD.replace("PATCH 3", "PATCH (3)"), "BASERT_VERSION_PATCH is '(3)', not a decimal", id="expr"),
    pytest.param(GOOD.replace("MAJOR 1", "MAJOR 1 /* one */"), "BASERT_VERSION_MAJOR is not defined",
                 id="not-alone-on-its-line"),
])
def test_parse_header_refuses(text: str, fault: str) -> None:
    with pytest.raises(BadFile, match=re.escape(fault)):
        header.parse_header(text, "h.h")


def test_parse_header() -> None:
    facts = header.parse_header(GOOD)
    assert (facts.version, facts.abi) == ("1.22.3", 7)


def test_unreadable_header(tmp_path: Path) -> None:
    with pytest.raises(BadFile, match="cannot read our baseRT header"):
        header.read_header(tmp_path / "nope.h")


def test_unnumbered_lines() -> None:
    assert header.unnumbered_line(1) == "0.3"
    assert header.unnumbered_line(2) is None
