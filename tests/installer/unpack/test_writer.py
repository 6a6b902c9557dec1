"""The writer: members judged and put on disk as built (modes, links, parents made), their content
checked against the size it declares, trees merged without writing through a link.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from superfluid.installer.unpack.extract import extract_archive
from superfluid.installer.unpack.rules import Entry, ExtractLimits, Member, Members, Opener, UnsafeArchive
from superfluid.installer.unpack.writer import ExtractFailed, merge_tree, write_members
from superfluid.runtime.hostfacts import elf
from superfluid.runtime.hostfacts.needs import measure
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.archives import E, make_tar, snapshot
from tests.runtime.fake_roots import real_library


def _members(*members: tuple[Member, bytes | None]) -> Members:
    """Members as a reader yields them, a file's content from memory."""
    for member, data in members:
        opener: Opener | None = (lambda data=data: io.BytesIO(data)) if data is not None else None
        yield member, opener, None


def _write(dest: Path, members: Iterable[tuple[Member, bytes | None]], *,
           allowance: int = 1 << 20) -> dict[str, Entry]:
    dest.mkdir()
    return write_members("a.tar", str(dest), _members(*members), ExtractLimits(), allowance)


def test_members_are_written_as_judged(tmp_path: Path) -> None:
    tree = _write(tmp_path / "x", [(Member("./", "dir"), None), (Member("d/e/f", "file", 2, 0o4775), b"hi"),
                                   (Member("d/ro", "dir", mode=0o500), None),
                                   (Member("l", "symlink", linkname="d"), None),
                                   (Member("h", "hardlink", linkname="d/e/f"), None)])
    assert tree == {"d": Entry("dir"), "d/e": Entry("dir"), "d/e/f": Entry("file"), "d/ro": Entry("dir"),
                    "l": Entry("symlink", "d"), "h": Entry("file")}
    assert snapshot(tmp_path / "x") == {"d": ("dir", 0o755), "d/e": ("dir", 0o755), "d/ro": ("dir", 0o700),
                                        "d/e/f": ("file", 2, 0o755, b"hi"), "l": ("link", "d"),
                                        "h": ("file", 2, 0o755, b"hi")}


def test_a_member_longer_than_it_declares_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="'f' holds more than the 2 bytes it declares"):
        _write(tmp_path / "x", [(Member("f", "file", 2), b"abc")])


def test_a_member_shorter_than_it_declares_is_a_bad_file(tmp_path: Path) -> None:
    with pytest.raises(BadFile, match="'f' holds 1 bytes, not the 2 it declares"):
        _write(tmp_path / "x", [(Member("f", "file", 2), b"a")])


def test_a_refused_member_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="would unpack to more than 3 bytes"):
        _write(tmp_path / "x", [(Member("a", "file", 2), b"ab"), (Member("b", "file", 2), b"cd")], allowance=3)
    assert os.listdir(tmp_path / "x") == ["a"]


def test_a_write_the_disk_refuses_is_extract_failed(tmp_path: Path) -> None:
    gone = tmp_path / "gone"  # a destination removed under the writer
    with pytest.raises(ExtractFailed, match="could not extract a.tar into .*gone: f: No such file or directory"):
        write_members("a.tar", str(gone), _members((Member("f", "file", 1), b"a")), ExtractLimits(), 1 << 20)


# --- what lands from a real archive --------------------------------------------------------------------

GOOD = [
    E("dir", "pkg-1.0"),
    E("dir", "pkg-1.0/lib"),
    E("file", "pkg-1.0/lib/libx.so.1.2", b"\x7fELF real library"),
    E("symlink", "pkg-1.0/lib/libx.so.1", "libx.so.1.2"),
    E("symlink", "pkg-1.0/lib/libx.so", "libx.so.1"),
    E("file", "pkg-1.0/bin/tool", "#!/bin/sh\n", 0o4755),
    E("hardlink", "pkg-1.0/bin/tool2", "pkg-1.0/bin/tool"),
    E("file", "pkg-1.0/share/doc/README", "hi", 0o666),
    E("symlink", "pkg-1.0/share/lib", "../lib"),
    E("file", "pkg-1.0/ünïcode", "u"),
]


def test_good_archive_lands_as_built(area: Path) -> None:
    archive = make_tar(area / "good.tar.gz", GOOD)
    root = extract_archive(archive, area / "stage" / "x")
    assert root == area / "stage" / "x" / "pkg-1.0"
    snap = snapshot(root)
    assert snap["lib/libx.so.1.2"] == ("file", 17, 0o644, b"\x7fELF real library")
    assert snap["lib/libx.so"] == ("link", "libx.so.1")
    assert snap["bin/tool"] == ("file", 10, 0o755, b"#!/bin/sh\n")  # setuid gone
    assert snap["bin/tool2"] == snap["bin/tool"]
    assert os.stat(root / "bin/tool").st_ino == os.stat(root / "bin/tool2").st_ino
    assert snap["share/doc/README"][2] == 0o644  # world write gone
    assert snap["share/lib"] == ("link", "../lib")
    assert snap["bin"] == ("dir", 0o755)  # made without a member of its own
    assert (root / "share" / "lib" / "libx.so").read_bytes() == b"\x7fELF real library"
    assert (root / "ünïcode").read_text() == "u"


def test_merge_never_writes_into_a_link(tmp_path: Path) -> None:
    dst, src = tmp_path / "dst", tmp_path / "src"
    (tmp_path / "elsewhere").mkdir()
    dst.mkdir()
    (dst / "d").symlink_to(tmp_path / "elsewhere")
    (src / "d").mkdir(parents=True)
    (src / "d" / "x").write_text("x")
    merge_tree(src, dst)
    assert os.listdir(tmp_path / "elsewhere") == []


def test_the_needs_of_extracted_shared_objects_are_read_as_they_are_written(area: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer reads each shared object's ELF facts beside the inflating (``elf.remember``): the
    check before the probe (``needs.measure``) reads none of them again, after the tree was moved."""
    libstdcxx = Path(real_library("libstdc++.so.6")).read_bytes()
    archive = make_tar(area / "libs.tar.gz", [E("dir", "pkg"), E("file", "pkg/lib/libstdc++.so.6", libstdcxx, 0o755),
                                              E("file", "pkg/lib/notes.txt", "not a library")])
    root = extract_archive(archive, area / "stage" / "x")
    lib = area / "staging" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    merge_tree(root, lib)
    monkeypatch.setattr(elf.ELFFile, "__init__", lambda self, f: pytest.fail("a shared object was read again"))
    measured = measure(lib)
    assert measured.glibc is not None and measured.files["glibc"] == "libstdc++.so.6"
