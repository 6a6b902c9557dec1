"""``manifest/release_files``: the files beside each artifact — the ``.sha256`` line ``sha256sum -c``
checks and the installer reads, and the kinds ``ci/pack`` writes."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from superfluid.manifest.release_files import PACK_SUFFIXES, file_sha256, sha256_line
from superfluid.runtime.digests import parse_sha256_file


def test_the_kinds_beside_an_artifact() -> None:
    assert PACK_SUFFIXES == (".sha256", ".compat.json", ".compat.json.minisig")


def test_file_sha256_reads_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "a.tar.gz"
    data = bytes(range(256)) * 9000  # more than one chunk
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "absent")


def test_the_line_is_what_sha256sum_checks_and_the_installer_reads(tmp_path: Path) -> None:
    path = tmp_path / "a.tar.gz"
    path.write_bytes(b"artifact")
    digest = file_sha256(path)
    line = sha256_line(path.name, digest.upper())
    assert line == f"{digest}  a.tar.gz\n"
    (tmp_path / "a.tar.gz.sha256").write_text(line)
    done = subprocess.run(["sha256sum", "-c", "a.tar.gz.sha256"], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert parse_sha256_file("o/r", "v1", "a.tar.gz", line) == digest


@pytest.mark.parametrize("name", ["dir/a.tar.gz", "/abs/a.tar.gz", "a\nb.tar.gz"])
def test_the_line_names_a_file_beside_it(name: str) -> None:
    with pytest.raises(ValueError, match="names a file in the same directory"):
        sha256_line(name, "0" * 64)
