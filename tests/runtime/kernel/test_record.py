"""What an install holds, file by file (runtime/kernel/record.py): the rule that says what differs, as a
table; reading a tree without following links or opening FIFOs; the receipt's list."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.receipt import Receipt, Source, read_receipt, write_receipt
from superfluid.runtime.kernel.record import (
    FILES,
    UNRECORDED,
    FileRecord,
    NotRecordable,
    compare,
    files_of,
    record_tree,
    verify_install,
    with_files,
)
from superfluid.runtime.kernel.schema import errors as schema_errors

A, B = "a" * 64, "b" * 64
LIB = FileRecord(path="lib/libx.so", size=10, sha256=A, executable=True)
LINK = FileRecord(path="lib/libx.so.1", link="libx.so")


def f(path: str, size: int = 10, sha: str = A, executable: bool = False) -> FileRecord:
    return FileRecord(path=path, size=size, sha256=sha, executable=executable)


#: (recorded, found, what compare answers: (change, path, a fragment of the detail))
CASES = [
    pytest.param([LIB, LINK], [LIB, LINK], [], id="the-same"),
    pytest.param([LIB], [], [("missing", "lib/libx.so", "records an executable file of 10 bytes")], id="missing"),
    pytest.param([LIB], [LIB, f("lib/libextra.so", 5)], [("added", "lib/libextra.so", "a file of 5 bytes")],
                 id="an-extra-so-counts"),
    pytest.param([LIB], [f("lib/libx.so", 10, B, True)], [("changed", "lib/libx.so", f"its SHA-256 is {B}")],
                 id="a-flipped-byte"),
    pytest.param([LIB], [f("lib/libx.so", 11, B, True)],
                 [("changed", "lib/libx.so", "11 bytes; the receipt records 10")], id="another-size"),
    pytest.param([LIB], [f("lib/libx.so", 10, A, False)], [("changed", "lib/libx.so", "no longer executable")],
                 id="lost-its-execute-bit"),
    pytest.param([f("lib/LICENSE")], [f("lib/LICENSE", executable=True)], [("changed", "lib/LICENSE", "is executable")],
                 id="made-executable"),
    pytest.param([LINK], [FileRecord(path="lib/libx.so.1", link="/etc/passwd")],
                 [("changed", "lib/libx.so.1", "links to /etc/passwd; the receipt records libx.so")],
                 id="link-retargeted"),
    pytest.param([LINK], [f("lib/libx.so.1")], [("changed", "lib/libx.so.1", "it is a file of 10 bytes; the receipt "
                                                                          "records a link to libx.so")],
                 id="link-replaced-by-a-file"),
    pytest.param([LIB], [FileRecord(path="lib/libx.so", other="a FIFO")], [("changed", "lib/libx.so", "it is a FIFO")],
                 id="a-fifo-in-its-place"),
    pytest.param([LIB], [FileRecord(path="lib/libx.so", other="a file that cannot be read (Permission denied)")],
                 [("changed", "lib/libx.so", "Permission denied")], id="unreadable"),
    pytest.param([], [FileRecord(path="lib/dev", other="a character device")], [("added", "lib/dev",
                                                                                 "a character device")],
                 id="a-device-added"),
    pytest.param([f("b"), f("a")], [f("c"), f("a", sha=B)],
                 [("changed", "a", ""), ("missing", "b", ""), ("added", "c", "")], id="sorted-by-path"),
]


@pytest.mark.parametrize(("recorded", "found", "want"), CASES)
def test_compare(recorded: list[FileRecord], found: list[FileRecord], want: list[tuple[str, str, str]]) -> None:
    got = compare(recorded, found)
    assert [(d.change, d.path) for d in got] == [(c, p) for c, p, _ in want]
    for d, (_, _, fragment) in zip(got, want, strict=True):
        assert fragment in d.detail


def _tree(root: Path) -> None:
    (root / "lib" / "sub").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "lib" / "libx.so").write_bytes(b"\x7fELF" + b"\0" * 6)
    os.chmod(root / "lib" / "libx.so", 0o755)
    (root / "lib" / "sub" / "data.txt").write_text("hello")
    os.symlink("libx.so", root / "lib" / "libx.so.1")
    os.symlink("sub", root / "lib" / "alias")  # a link to a directory is a link, never followed
    (root / "runtime.json").write_text("{}")


def test_record_tree_reads_files_and_links_never_following(tmp_path: Path) -> None:
    _tree(tmp_path)
    got = record_tree(tmp_path, skip=("runtime.json",))
    assert [r.path for r in got] == ["lib/alias", "lib/libx.so", "lib/libx.so.1", "lib/sub/data.txt"]
    by = {r.path: r for r in got}
    assert by["lib/alias"].link == "sub" and by["lib/libx.so.1"].link == "libx.so"
    assert (by["lib/libx.so"].size, by["lib/libx.so"].executable) == (10, True)
    assert by["lib/sub/data.txt"].sha256 == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert not by["lib/sub/data.txt"].executable


def test_a_fifo_is_reported_never_opened(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.mkfifo(tmp_path / "lib" / "pipe")  # opening it to read would wait for a writer forever
    got = {r.path: r for r in record_tree(tmp_path)}
    assert got["lib/pipe"].kind == "other" and got["lib/pipe"].describe() == "a FIFO"


def test_json_round_trip_and_bad_entries(tmp_path: Path) -> None:
    for record in (LIB, LINK, f("lib/LICENSE")):
        assert FileRecord.from_json(record.to_json(), "r.json", 0) == record
    assert LINK.to_json() == {"path": "lib/libx.so.1", "link": "libx.so"}
    assert "executable" not in f("x").to_json()
    for bad in ({}, {"path": ""}, {"path": "x", "size": -1, "sha256": A}, {"path": "x", "size": 1, "sha256": "nope"},
                {"path": "x", "size": True, "sha256": A}, []):
        with pytest.raises(BadFile, match=r"r.json at \$.files\[3\]"):
            FileRecord.from_json(bad, "r.json", 3)


def _receipt(**extra: object) -> Receipt:
    return Receipt(id="basert", install="0.4.0-cpu", version="0.4.0", backend="cpu",
                   worker="bin/superfluid-worker-basert", sources=(Source("https://x.invalid/b.tar.gz", A),),
                   tested=True, chosen_by="abi", installed_at="2026-01-01T00:00:00Z", extra=dict(extra))


def test_with_files_records_every_file_but_the_receipt_and_reads_back(tmp_path: Path) -> None:
    _tree(tmp_path)
    receipt = with_files(_receipt(), tmp_path)
    assert [e["path"] for e in receipt.extra[FILES]] == ["lib/alias", "lib/libx.so", "lib/libx.so.1",
                                                         "lib/sub/data.txt"]
    write_receipt(tmp_path / "runtime.json", receipt)
    doc = json.loads((tmp_path / "runtime.json").read_text())
    assert schema_errors(doc, "runtime") == []
    assert list(doc)[:3] == ["schema", "id", "install"] and list(doc)[-1] == FILES  # a key added, none changed
    back = read_receipt(tmp_path / "runtime.json")
    assert files_of(back) == record_tree(tmp_path, skip=("runtime.json",))
    assert verify_install("basert", "0.4.0-cpu", tmp_path, back).ok


def test_with_files_refuses_what_no_receipt_can_hold(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.mkfifo(tmp_path / "lib" / "pipe")
    with pytest.raises(NotRecordable, match="lib/pipe is a FIFO"):
        with_files(_receipt(), tmp_path)
    os.unlink(tmp_path / "lib" / "pipe")
    with pytest.raises(NotRecordable, match="holds 4 files, more than its receipt can record within 600 bytes"):
        with_files(_receipt(), tmp_path, max_bytes=600)


def test_a_receipt_without_a_list_is_unrecorded_never_a_crash(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert files_of(_receipt()) is None
    verdict = verify_install("basert", "0.4.0-cpu", tmp_path, _receipt())
    assert not verdict.ok and verdict.problem == UNRECORDED
    assert verdict.summary() == (f"basert 0.4.0-cpu: {UNRECORDED}: "
                                 "`superfluid runtime repair basert 0.4.0-cpu` puts it back")
    broken = verify_install("basert", "0.4.0-cpu", tmp_path, _receipt(files="all of them"))
    assert "its receipt does not read" in (broken.problem or "")
    unread = verify_install("basert", "0.4.0-cpu", tmp_path, None, "runtime.json: is not valid JSON")
    assert unread.problem == "its receipt does not read (runtime.json: is not valid JSON)"


def test_a_verdict_names_each_difference_and_the_fix(tmp_path: Path) -> None:
    _tree(tmp_path)
    receipt = with_files(_receipt(), tmp_path)
    (tmp_path / "lib" / "libx.so").write_bytes(b"\x7fELF" + b"\1" + b"\0" * 5)
    (tmp_path / "lib" / "libevil.so").write_bytes(b"x")
    os.unlink(tmp_path / "lib" / "sub" / "data.txt")
    verdict = verify_install("basert", "0.4.0-cpu", tmp_path, receipt)
    assert [(d.change, d.path) for d in verdict.differences] == [
        ("added", "lib/libevil.so"), ("changed", "lib/libx.so"), ("missing", "lib/sub/data.txt")]
    assert verdict.summary() == ("basert 0.4.0-cpu does not match its receipt (1 missing, 1 changed, 1 added): "
                                 "`superfluid runtime repair basert 0.4.0-cpu` puts it back")
    doc = verdict.to_json()
    assert doc["ok"] is False and doc["fix"] == "superfluid runtime repair basert 0.4.0-cpu"
    assert [d["path"] for d in doc["added"]] == ["lib/libevil.so"] and doc["recorded"] == 4


def test_an_extracted_file_is_recorded_from_its_write_and_a_changed_one_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extractor hashes each file as it writes it (``record.remember``): recording the staged
    tree reads none of them again, until one changes (its size or modification time)."""
    import hashlib

    from superfluid.installer.unpack.extract import extract_archive
    from superfluid.runtime.kernel import record
    from tests.installer.archives import E, make_tar

    archive = make_tar(tmp_path / "a.tar.gz", [E("dir", "lib"), E("file", "lib/libx.so", b"engine" * 1000, 0o755),
                                               E("file", "lib/data.txt", b"hello")])
    root = Path(extract_archive(archive, tmp_path / "x", descend=False))
    read: list[bytes] = []
    real = record._hash
    monkeypatch.setattr(record, "_hash", lambda path: read.append(path) or real(path))
    got = {r.path: r for r in record_tree(root)}
    assert read == []
    assert got["lib/libx.so"].sha256 == hashlib.sha256(b"engine" * 1000).hexdigest()
    assert (got["lib/libx.so"].size, got["lib/libx.so"].executable) == (6000, True)
    data = root / "lib" / "data.txt"
    written = data.stat().st_mtime_ns
    data.write_bytes(b"HELLO")  # rewritten in place to the same size...
    os.utime(data, ns=(written, written + 1))  # ...at another time (even within one clock tick)
    got = {r.path: r for r in record_tree(root)}
    assert [os.path.basename(p) for p in read] == [b"data.txt"]
    assert got["lib/data.txt"].sha256 == hashlib.sha256(b"HELLO").hexdigest()


def test_a_glance_finds_names_that_are_not_utf8_as_the_record_does(tmp_path: Path) -> None:
    """A name or link target that is not UTF-8 is recorded with its bytes escaped; a glance looks up
    the same bytes (it called such an install broken: the file "missing", the link "changed")."""
    from superfluid.runtime.kernel.record import glance

    top = os.fsencode(tmp_path)
    (tmp_path / "lib").mkdir()
    with open(os.path.join(top, b"lib", b"caf\xe9.txt"), "wb") as f:
        f.write(b"x")
    os.symlink(b"lib\xff.so", os.path.join(top, b"lib", b"alias"))
    (tmp_path / "lib" / "spelt\\x41.txt").write_text("y")  # UTF-8 that spells an escape: itself
    receipt = with_files(_receipt(), tmp_path)
    assert sorted(e["path"] for e in receipt.extra[FILES]) == ["lib/alias", "lib/caf\\xe9.txt", "lib/spelt\\x41.txt"]
    assert glance(receipt, tmp_path) == ()
    os.unlink(os.path.join(top, b"lib", b"caf\xe9.txt"))
    (tmp_path / "lib" / "spelt\\x41.txt").write_text("longer")
    assert [(d.path, d.change) for d in glance(receipt, tmp_path)] == [("lib/caf\\xe9.txt", "missing"),
                                                                     ("lib/spelt\\x41.txt", "changed")]
