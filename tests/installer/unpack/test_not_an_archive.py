"""A ``--from`` file that is no archive is named for what it is (issue 42, item 23), through the real CLI:
never "its download is corrupt … run the same command again", which sends the user round the same
failure; an archive format cut short is named as one that is cut short or damaged."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from tests.conftest import Home


@pytest.mark.parametrize(("data", "what"), [
    pytest.param(b"hello, these are notes\nmore\n", "a text file (its first line: 'hello, these are notes')",
                 id="text"),
    pytest.param(b"\x7fELF\x02\x01\x01" + bytes(200), "an ELF binary (a library or program, not an archive of one)",
                 id="elf"),
    pytest.param(b"<!DOCTYPE html><html><body>404</body></html>\n",
                 "an HTML page (a web page saved in place of the file?)", id="html"),
    pytest.param(b"", "an empty file", id="empty"),
])
def test_a_file_that_is_no_archive_is_named_for_what_it_is(cli_home: Home, tmp_path: Path, data: bytes,
                                                           what: str) -> None:
    notes = tmp_path / "notes.tar.gz"
    notes.write_bytes(data)
    run = cli_home.superfluid("runtime", "install", "basert", "--from", str(notes))
    assert run.code == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last == (f"superfluid: {notes}: is not a release archive: it is {what}: nothing was installed from it; "
                    "name a release archive of the runtime (.tar.gz, .tar.xz or .zip)")
    assert "run the same command again" not in run.stderr and "corrupt" not in run.stderr
    assert cli_home.installs() == []


def test_an_archive_cut_short_is_named_as_damaged(cli_home: Home, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("libbaseRT.so")
        info.size = 200_000
        tar.addfile(info, io.BytesIO(os.urandom(info.size)))
    cut.write_bytes(raw.getvalue()[:100])  # inside the first member's header
    run = cli_home.superfluid("runtime", "install", "basert", "--from", str(cut))
    assert run.code == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"superfluid: {cut}: is not a readable archive (")
    assert last.endswith("): it is cut short or damaged: nothing was installed from it; fetch it again from where "
                         "it came from")
    assert "run the same command again" not in run.stderr
