"""``manifest/measure_needs`` (``ci/measure-needs``): what a build needs, measured from a folder or a
release archive of it, printed as JSON; what is neither is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superfluid.manifest.measure_needs import main, measure_path
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from tests.end_to_end.releases import libllama_archive


def test_a_folder_and_its_archive_measure_the_same(libllama_v2: Path, tmp_path: Path) -> None:
    archive = tmp_path / "llama-b11549-bin-ubuntu-x64.tar.gz"
    archive.write_bytes(libllama_archive(libllama_v2))
    folder, packed = measure_path(str(libllama_v2)), measure_path(str(archive))
    assert folder == packed and folder.glibc == "2.34" and "libstdc++.so.6" in folder.libraries


def test_main_prints_the_needs(libllama_v2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(libllama_v2)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["glibc"] == "2.34" and doc["files"]["glibc"].startswith(("libllama", "libggml"))


@pytest.mark.parametrize("make", ["absent", "text", "broken-object"])
def test_what_does_not_measure(tmp_path: Path, make: str, capsys: pytest.CaptureFixture[str],
                               libllama_v2: Path) -> None:
    path = tmp_path / "x"
    if make == "text":
        path.write_text("not an archive\n")
    elif make == "broken-object":
        path.mkdir()
        (path / "libx.so").write_bytes((libllama_v2 / "libllama.so").read_bytes()[:300])  # truncated
    error = SuperfluidError if make == "broken-object" else UsageError
    with pytest.raises(error):
        measure_path(str(path))
    assert main([str(path)]) == (1 if make == "broken-object" else 2)
    assert capsys.readouterr().err.startswith("ci/measure-needs: ")
