"""``installer/unpack/kind.py``: what a file that does not read as an archive is, by its first bytes."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from superfluid.installer.unpack.kind import describe


@pytest.mark.parametrize(("data", "what"), [
    pytest.param(b"", "an empty file", id="empty"),
    pytest.param(b"first line\nsecond\n", "a text file (its first line: 'first line')", id="text"),
    pytest.param(b"\n\n  \n", "a text file of blank lines", id="blank"),
    pytest.param(b"x" * 100, "a text file (its first line: '" + "x" * 57 + "...')", id="long-line"),
    pytest.param("déjà vu".encode() * 700, "a text file (its first line: '" + ("déjà vu" * 9)[:57] + "...')",
                 id="utf8-cut-at-the-head"),
    pytest.param(b"\x7fELF\x02\x01", "an ELF binary (a library or program, not an archive of one)", id="elf"),
    pytest.param(b"  <html><body>", "an HTML page (a web page saved in place of the file?)", id="html"),
    pytest.param(b"\x00\x01\x02\xff\xfe" * 10, "binary data of no archive format", id="binary"),
    pytest.param(b"abc\x00def", "binary data of no archive format", id="nul"),
    pytest.param(gzip.compress(b"x")[:5], None, id="an-archive-cut-short"),
])
def test_describe_names_what_a_file_is(tmp_path: Path, data: bytes, what: str | None) -> None:
    path = tmp_path / "f"
    path.write_bytes(data)
    assert describe(path) == what


def test_a_file_that_cannot_be_read_is_not_described(tmp_path: Path) -> None:
    assert describe(tmp_path / "missing") is None
