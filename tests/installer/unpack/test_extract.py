"""Extraction, the entry: the reader picked by the archive's first bytes, a broken archive a BadFile,
the root kept (descending through single top-level directories), several archives merged into one lib.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import pytest

from superfluid.installer.unpack.extract import extract_all, extract_archive
from superfluid.installer.unpack.rules import UnsafeArchive
from superfluid.installer.unpack.writer import ExtractFailed
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.archives import E, make_tar, make_zip, refused, snapshot

PKG = [E("dir", "pkg-1.0"), E("file", "pkg-1.0/lib/libx.so.1", "x"), E("symlink", "pkg-1.0/lib/libx.so", "libx.so.1")]


def test_the_reader_is_picked_by_the_first_bytes(area: Path) -> None:
    zipped = make_zip(area / "named-as-a.tar.gz", PKG)
    assert (extract_archive(zipped, area / "stage" / "z") / "libx.so.1").read_text() == "x"  # pkg-1.0/lib
    tarred = make_tar(area / "named-as-a.zip", PKG)
    assert (extract_archive(tarred, area / "stage" / "t") / "libx.so.1").read_text() == "x"  # pkg-1.0/lib


def test_a_stream_needs_its_size(area: Path) -> None:
    with pytest.raises(ValueError, match="a streamed archive needs its size"):
        extract_archive("a.tar", area / "stage" / "x", stream=io.BytesIO(b""))
    assert os.listdir(area / "stage") == []


def test_truncated_archive_is_bad_file(area: Path) -> None:
    full = make_tar(area / "full.tar.gz", [E("file", "big", os.urandom(200_000))])
    cut = area / "cut.tar.gz"
    cut.write_bytes(full.read_bytes()[:50_000])
    full.unlink()
    err = refused(area, cut, "not a readable archive|holds .* bytes, not the", error=BadFile)
    assert not isinstance(err, UnsafeArchive)


def test_not_an_archive_is_bad_file(area: Path) -> None:
    junk = area / "junk.tar.gz"
    junk.write_bytes(gzip.compress(b"this is not a tar file" * 10))
    refused(area, junk, "not a readable archive", error=BadFile)


def test_no_descend_keeps_top(area: Path) -> None:
    archive = make_tar(area / "good.tar.gz", PKG)
    root = extract_archive(archive, area / "stage" / "x", descend=False)
    assert root == area / "stage" / "x"
    assert (root / "pkg-1.0" / "lib" / "libx.so").is_symlink()


def test_descends_through_single_directories_ignoring_dot_entries(area: Path) -> None:
    archive = make_tar(area / "deep.tar.gz", [E("file", "._AppleDouble", "x"), E("file", "build/bin/libllama.so", "L"),
                                              E("file", "build/bin/llama-cli", "C")])
    root = extract_archive(archive, area / "stage" / "x")
    assert root == area / "stage" / "x" / "build" / "bin"
    assert sorted(os.listdir(root)) == ["libllama.so", "llama-cli"]


# --- several archives into one lib -------------------------------------------------------------------

def test_extract_all_merges_first_wins(tmp_path: Path) -> None:
    a = make_tar(tmp_path / "a.tar.gz", [E("file", "llama/libllama.so", "from a"), E("file", "llama/sub/x", "ax")])
    b = make_tar(tmp_path / "b.tar.gz", [E("file", "cudart/libllama.so", "from b"),
                                         E("file", "cudart/libcudart.so", "c"), E("file", "cudart/sub/y", "by")])
    lib = tmp_path / "staging" / "lib"
    (tmp_path / "staging").mkdir()
    extract_all([a, b], lib)
    assert (lib / "libllama.so").read_text() == "from a"
    assert (lib / "libcudart.so").read_text() == "c"
    assert sorted(os.listdir(lib / "sub")) == ["x", "y"]
    assert os.listdir(tmp_path / "staging") == ["lib"]  # the per-archive directories are gone


def test_extract_all_refuses_a_link_that_escapes_only_once_merged(area: Path) -> None:
    # Each archive alone is safe; merged, b's p resolves through a's q, which points at lib's root.
    a = make_tar(area / "a.tar.gz", [E("symlink", "d/e/q", "../.."), E("file", "keep", "k")])
    b = make_tar(area / "b.tar.gz", [E("dir", "d/e/q"), E("symlink", "p", "d/e/q/../outside"), E("file", "other", "o")])
    (area / "stage" / "lib").mkdir()
    before = {k: v for k, v in snapshot(area).items() if not k.startswith("stage/")}
    with pytest.raises(UnsafeArchive, match="'p' links to 'd/e/q/../outside', outside the install"):
        extract_all([a, b], area / "stage" / "lib")
    assert {k: v for k, v in snapshot(area).items() if not k.startswith("stage/")} == before


def test_destination_must_be_new(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", [E("file", "a", "1")])
    (tmp_path / "exists").mkdir()
    with pytest.raises(ExtractFailed, match="File exists"):
        extract_archive(archive, tmp_path / "exists")
