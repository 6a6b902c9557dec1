"""The zip reader: members read from the central directory, deflate data through our inflater, every
zip (good or lying) with the same outcome as through zipfile's own reader.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import stat
import zipfile
from pathlib import Path

import pytest

from superfluid.installer.unpack import inflate
from superfluid.installer.unpack import zip as zip_reader
from superfluid.installer.unpack.extract import extract_archive
from superfluid.installer.unpack.rules import Member
from superfluid.installer.unpack.zip import is_zip, zip_members
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.archives import E, make_tar, make_zip, refused


def test_is_zip(tmp_path: Path) -> None:
    assert is_zip(str(make_zip(tmp_path / "a.zip", [E("file", "a", "1")])))
    with zipfile.ZipFile(tmp_path / "empty.zip", "w"):
        pass
    assert is_zip(str(tmp_path / "empty.zip"))
    assert not is_zip(str(make_tar(tmp_path / "a.tar.gz", [E("file", "a", "1")])))
    (tmp_path / "a.gz").write_bytes(gzip.compress(b"PK\x03\x04"))
    assert not is_zip(str(tmp_path / "a.gz"))


def test_members_with_their_kinds_and_modes(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "a.zip", [E("dir", "p", mode=0o750), E("file", "p/a", "abc", 0o4755),
                                            E("symlink", "p/l", "a"), E("fifo", "p/f"), E("chr", "p/c")])
    seen = []
    for member, opener, defence in zip_members(str(archive)):
        assert defence is None
        content = None
        if opener is not None:
            with opener() as src:
                content = b"".join(src.pieces())  # type: ignore[attr-defined]
        seen.append((member, content))
    assert seen == [(Member("p/", "dir", 0, 0o750), None), (Member("p/a", "file", 3, 0o4755), b"abc"),
                    (Member("p/l", "symlink", 1, 0o644, "a"), None), (Member("p/f", "fifo", 0, 0o644), None),
                    (Member("p/c", "chardev", 0, 0o644), None)]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_zip_good_and_hostile(area: Path) -> None:
    good = make_zip(area / "good.zip", [E("dir", "p"), E("file", "p/a.so", "A", 0o755), E("symlink", "p/b.so", "a.so")])
    root = extract_archive(good, area / "stage" / "z")
    assert (root / "a.so").read_text() == "A" and os.readlink(root / "b.so") == "a.so"
    assert stat.S_IMODE(os.stat(root / "a.so").st_mode) == 0o755
    for i, (entries, fragment) in enumerate([
        ([E("file", "../evil", "x")], "climbs with '..'"),
        ([E("symlink", "l", "/etc")], "absolute target"),
        ([E("symlink", "l", "../../outside")], "outside the install"),
        ([E("fifo", "p")], "FIFO"),
        ([E("file", "a", "x"), E("file", "a", "y")], "appears twice"),
    ]):
        refused(area, make_zip(area / f"hostile{i}.zip", entries), fragment)


def _pe(seed: int, size: int) -> bytes:
    """Bytes that compress about as a Windows DLL does (~3x): a header, then repeated and varied runs."""
    rnd = random.Random(seed)
    words = [rnd.randbytes(rnd.randrange(4, 48)) for _ in range(512)]
    out = bytearray(b"MZ\x90\x00" + bytes(60))
    while len(out) < size:
        out += rnd.choice(words)
    return bytes(out[:size])


#: a llama.cpp Windows release as it is zipped (llama-b4567-bin-win-cpu-x64.zip): flat, made on
#: Windows (no Unix mode in the external attributes, only the archive attribute), every member deflated
WINDOWS = {"LICENSE": b"MIT License\r\n\r\nCopyright (c) 2023-2025 The ggml authors\r\n" * 20,
           "ggml-base.dll": _pe(1, 1_300_000), "ggml-cpu.dll": _pe(2, 2_600_000), "ggml.dll": _pe(3, 70_000),
           "llama.dll": _pe(4, 3_100_000), "llama-server.exe": _pe(5, 4_500_000), "empty.txt": b""}


def _windows_zip(path: Path, members: dict[str, bytes], *, compress: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zi = zipfile.ZipInfo(name, date_time=(2025, 1, 30, 12, 0, 0))
            zi.create_system = 0  # MS-DOS/Windows
            zi.external_attr = 0x20  # FILE_ATTRIBUTE_ARCHIVE
            zi.compress_type = compress
            zf.writestr(zi, data)
    return path


class _Unused:
    def decompress(self, *args: object) -> bytes:
        raise AssertionError("zipfile's own inflater was used")


def test_a_llama_cpp_windows_zip_inflates_through_the_inflater(area: Path, engine: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []

    def spy() -> object:
        made.append(inflate.raw_inflater())
        return made[-1]

    monkeypatch.setattr(zip_reader, "raw_inflater", spy)
    monkeypatch.setattr(zipfile, "_get_decompressor", lambda compress_type: _Unused())  # zipfile's is never used
    archive = _windows_zip(area / "llama-b4567-bin-win-cpu-x64.zip", WINDOWS)
    root = extract_archive(archive, area / "stage" / "win")
    assert sorted(os.listdir(root)) == sorted(WINDOWS)
    for name, data in WINDOWS.items():
        assert (root / name).read_bytes() == data, name
        assert stat.S_IMODE(os.stat(root / name).st_mode) == 0o644  # no Unix mode: the default
    assert len(made) == len(WINDOWS) - 1  # one per deflated member with content
    assert archive.stat().st_size < sum(map(len, WINDOWS.values())) / 2


def _zip_outcome(archive: Path, dest: Path) -> object:
    try:
        root = extract_archive(archive, dest)
    except BadFile as e:
        return type(e), str(e)
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


def _patched(data: bytes, old: bytes, new: bytes, *, last: bool = False) -> bytes:
    at = data.rfind(old) if last else data.find(old)
    assert at >= 0
    return data[:at] + new + data[at + len(old):]


def _hostile_zips(area: Path) -> list[Path]:
    """Zips whose members lie, each read by our inflater and by zipfile's own reader alike."""
    good = _windows_zip(area / "good.zip", {"a.dll": _pe(7, 200_000), "b.txt": b"hello"}).read_bytes()
    stored = _windows_zip(area / "stored.zip", {"a.dll": _pe(8, 5000)}, compress=zipfile.ZIP_STORED).read_bytes()
    info = zipfile.ZipFile(io.BytesIO(good)).getinfo("a.dll")
    central_size = info.file_size.to_bytes(4, "little")
    out = {
        # a member longer than it declares (the central directory's size made smaller): a bomb's trick
        "shorter-declared": _patched(good, central_size, (info.file_size // 2).to_bytes(4, "little"), last=True),
        # shorter than it declares
        "longer-declared": _patched(good, central_size, (info.file_size * 2).to_bytes(4, "little"), last=True),
        "bad-crc-stored": _patched(stored, _pe(8, 5000)[1000:1010], bytes(10)),
        "bad-crc-deflated": _patched(good, info.CRC.to_bytes(4, "little"), b"\0\0\0\0", last=True),
        "corrupt-deflate": good[:100] + bytes(b ^ 0x5A for b in good[100:2000]) + good[2000:],
        "names-differ": _patched(good, b"a.dll", b"x.dll"),  # the local header's name, not the directory's
    }
    paths = []
    for name, data in out.items():
        (area / f"{name}.zip").write_bytes(data)
        paths.append(area / f"{name}.zip")
    return [area / "good.zip", area / "stored.zip", *paths]


def test_zip_members_are_read_as_zipfile_reads_them(area: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every zip, good or lying, has the same outcome through our inflater as through zipfile's own
    reader: the same files, or the same error (a member longer or shorter than it declares, a wrong
    CRC-32, corrupt deflate data, a local header that names another member)."""
    archives = _hostile_zips(area)
    ours = [_zip_outcome(a, area / "stage" / f"ours-{i}") for i, a in enumerate(archives)]
    monkeypatch.setattr(zip_reader, "_zip_opener", lambda zf, zi, archive: lambda: zf.open(zi))
    theirs = [_zip_outcome(a, area / "stage" / f"theirs-{i}") for i, a in enumerate(archives)]
    for archive, a, b in zip(archives, ours, theirs, strict=True):
        if isinstance(a, tuple) and isinstance(b, tuple) and "decompressing" in b[1]:
            assert a[0] is b[0] and "not a readable archive" in a[1], archive.name  # the inflater's own words
        else:
            assert a == b, archive.name
    assert [isinstance(o, dict) for o in ours] == [True, True, False, False, False, False, False, False]
    # nothing is left of the refused ones
    assert sorted(os.listdir(area / "stage")) == ["ours-0", "ours-1", "theirs-0", "theirs-1"]
