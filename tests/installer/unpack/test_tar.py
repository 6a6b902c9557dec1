"""The tar reader: its members in archive order, one pass front to back from a file (inflated on a
second thread) or from a stream, and a refusal that stops its reading at once.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
from pathlib import Path

import pytest

from superfluid.installer.unpack import inflate, tar
from superfluid.installer.unpack.extract import extract_archive
from superfluid.installer.unpack.rules import Member, Members
from superfluid.installer.unpack.tar import tar_members
from tests.installer.archives import E, make_tar, refused

KINDS = [E("dir", "p"), E("file", "p/a", "abc", 0o4755), E("symlink", "p/l", "a"), E("hardlink", "p/h", "p/a"),
         E("fifo", "p/f"), E("chr", "p/c")]
#: what the reader makes of KINDS, each regular file with its content
MEMBERS = [(Member("p", "dir", 0, 0o755), None), (Member("p/a", "file", 3, 0o4755), b"abc"),
           (Member("p/l", "symlink", 0, 0o644, "a"), None), (Member("p/h", "hardlink", 0, 0o644, "p/a"), None),
           (Member("p/f", "fifo", 0, 0o644), None), (Member("p/c", "chardev", 0, 0o644), None)]


def _read(members: Members) -> list[tuple[Member, bytes | None]]:
    seen = []
    for member, opener, defence in members:
        assert (defence is not None) is hasattr(tarfile, "data_filter")  # Python's own filter, where it has one
        content = None
        if opener is not None:
            with opener() as src:
                content = b"".join(src.pieces())  # type: ignore[attr-defined]
        seen.append((member, content))
    return seen


def test_members_come_in_archive_order_with_their_kinds(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", KINDS)
    assert _read(tar_members(str(archive), str(tmp_path / "x"))) == MEMBERS


def test_a_stream_is_read_as_the_file_is(tmp_path: Path) -> None:
    plain = make_tar(tmp_path / "a.tar", KINDS, mode="w").read_bytes()
    assert _read(tar_members("a.tar", str(tmp_path / "x"), io.BytesIO(plain))) == MEMBERS


def test_the_stream_only_moves_forward() -> None:
    forward = tar._Forward(io.BytesIO(b"abcdef"))
    assert forward.read(2) == b"ab"
    assert forward.seek(4) == 4 and forward.read() == b"ef"
    with pytest.raises(tarfile.ReadError, match="goes back to an earlier member"):
        forward.seek(1)


def test_uncompressed_and_xz_tars(area: Path) -> None:
    for mode, suffix in (("w", "tar"), ("w:xz", "tar.xz"), ("w:bz2", "tar.bz2")):
        archive = make_tar(area / f"a.{suffix}", [E("file", "a", "1")], mode=mode)
        root = extract_archive(archive, area / "stage" / suffix)
        assert (root / "a").read_text() == "1"


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz", "w"])
def test_a_tar_on_disk_is_inflated_on_a_second_thread(area: Path, mode: str, engine: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    real = inflate.Inflow.feed

    def feed(self: inflate.Inflow, chunk: bytes) -> bool:
        threads.append(threading.current_thread().name)
        return real(self, chunk)

    monkeypatch.setattr(inflate.Inflow, "feed", feed)
    big = os.urandom(3 << 20)
    archive = make_tar(area / "a.tar", [E("dir", "p"), E("file", "p/big", big), E("file", "p/zeros", bytes(5 << 20))],
                       mode=mode)
    root = extract_archive(archive, area / "stage" / "x")
    assert (root / "big").read_bytes() == big and (root / "zeros").stat().st_size == 5 << 20
    assert set(threads) == {"superfluid-inflate"}


def test_a_refusal_stops_the_inflating_thread(area: Path) -> None:
    archive = make_tar(area / "a.tar.gz", [E("file", "../evil", "x"), E("file", "big", os.urandom(20 << 20))])
    before = threading.active_count()
    refused(area, archive, "climbs with '..'")
    assert threading.active_count() == before
