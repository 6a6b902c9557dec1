"""Safe extraction (SPEC §8.4): the member rule as a table, then real hostile archives.

Each hostile-archive test builds a real .tar.gz (or .zip) in tmp_path, extracts it into a fresh
directory, asserts the typed error with a fragment of its message, and asserts that nothing under
tmp_path changed: nothing was written outside the destination and the destination is gone.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import stat
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from superfluid.installer.unpack import extract, inflate
from superfluid.installer.unpack.extract import (
    Entry,
    ExtractLimits,
    Member,
    UnsafeArchive,
    check_tree,
    extract_all,
    extract_archive,
    judge_member,
    merge_tree,
)
from superfluid.runtime.hostfacts import elf
from superfluid.runtime.hostfacts.needs import measure
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.archives import HOSTILE, E, make_tar, make_zip, snapshot
from tests.runtime.fake_roots import real_library

D, F, L = Entry("dir"), Entry("file"), (lambda t: Entry("symlink", t))

# --- the rule, pure ---------------------------------------------------------------------------------

ACCEPTED = [
    pytest.param(Member("a.txt", "file"), {}, "a.txt", 0o644, id="plain-file"),
    pytest.param(Member("./a/b.txt", "file"), {}, "a/b.txt", 0o644, id="dot-slash-prefix"),
    pytest.param(Member("a//b/./c", "file"), {}, "a/b/c", 0o644, id="empty-and-dot-components"),
    pytest.param(Member("./", "dir", mode=0o755), {}, "", 0o755, id="root-dir-entry"),
    pytest.param(Member("bin/tool", "file", mode=0o4755), {}, "bin/tool", 0o755, id="setuid-stripped"),
    pytest.param(Member("bin/tool", "file", mode=0o2775), {}, "bin/tool", 0o755, id="setgid-group-write-stripped"),
    pytest.param(Member("ro", "file", mode=0o400), {}, "ro", 0o600, id="owner-always-writes"),
    pytest.param(Member("d", "dir", mode=0o1777), {}, "d", 0o755, id="sticky-world-write-stripped"),
    pytest.param(Member("d", "dir", mode=0o750), {"d": D}, "d", 0o750, id="dir-repeated"),
    pytest.param(Member("lib/a.so", "symlink", linkname="a.so.1"), {"lib": D}, "lib/a.so", 0o755,
                 id="sibling-link"),
    pytest.param(Member("lib/x", "symlink", linkname="../share/x"), {}, "lib/x", 0o755, id="link-up-and-down"),
    pytest.param(Member("l", "symlink", linkname="."), {}, "l", 0o755, id="link-to-root"),
    pytest.param(Member("p", "symlink", linkname="q/.."), {"q": L("d/e")}, "p", 0o755,
                 id="link-through-deeper-link"),
    pytest.param(Member("h", "hardlink", linkname="./a"), {"a": F}, "h", 0o644, id="hardlink-to-earlier-file"),
]


@pytest.mark.parametrize(("member", "tree", "path", "mode"), ACCEPTED)
def test_judge_accepts(member: Member, tree: dict[str, Entry], path: str, mode: int) -> None:
    verdict = judge_member(member, tree)
    assert verdict.fault is None
    assert verdict.path == path
    if member.kind != "symlink":
        assert verdict.mode == mode


REFUSED = [
    pytest.param(Member("../evil", "file"), {}, "climbs with '..'", id="dotdot"),
    pytest.param(Member("a/../../evil", "file"), {}, "climbs with '..'", id="dotdot-nested"),
    pytest.param(Member("a/..", "dir"), {}, "climbs with '..'", id="dotdot-harmless-still-refused"),
    pytest.param(Member("/etc/passwd", "file"), {}, "is absolute", id="absolute"),
    pytest.param(Member("//x", "file"), {}, "is absolute", id="absolute-double-slash"),
    pytest.param(Member("dev", "chardev"), {}, "is a character device", id="chardev"),
    pytest.param(Member("dev", "blockdev"), {}, "is a block device", id="blockdev"),
    pytest.param(Member("pipe", "fifo"), {}, "is a FIFO", id="fifo"),
    pytest.param(Member("odd", "other"), {}, "is a special file", id="other-type"),
    pytest.param(Member("x" * 5000, "file"), {}, "longer than 4096 bytes", id="name-too-long"),
    pytest.param(Member("", "file"), {}, "has an empty name", id="empty-name"),
    pytest.param(Member("a/" * 128 + "x", "file"), {}, "nests deeper than 128 directories", id="too-deep"),
    pytest.param(Member("l/x", "file"), {"l": L("sub")}, "goes through the symlink 'l'", id="write-through-link"),
    pytest.param(Member("a/l/x", "dir"), {"a": D, "a/l": L(".")}, "goes through the symlink 'a/l'",
                 id="dir-through-link"),
    pytest.param(Member("f/x", "file"), {"f": F}, "which is a file", id="inside-a-file"),
    pytest.param(Member("lib.so", "file"), {"lib.so": L("real.so")}, "appears twice", id="file-over-link"),
    pytest.param(Member("lib.so", "symlink", linkname="x"), {"lib.so": F}, "appears twice", id="link-over-file"),
    pytest.param(Member("d", "symlink", linkname="x"), {"d": D}, "appears twice", id="link-over-dir"),
    pytest.param(Member("d", "dir"), {"d": L("x")}, "appears twice", id="dir-over-link"),
    pytest.param(Member("l", "symlink", linkname="/etc"), {}, "an absolute target", id="link-absolute"),
    pytest.param(Member("l", "symlink", linkname=".."), {}, "outside the install", id="link-parent"),
    pytest.param(Member("a/l", "symlink", linkname="../../x"), {}, "outside the install", id="link-climbs"),
    pytest.param(Member("l", "symlink", linkname="a/../../x"), {}, "outside the install", id="link-climbs-late"),
    pytest.param(Member("l", "symlink", linkname=""), {}, "empty target", id="link-empty"),
    pytest.param(Member("p", "symlink", linkname="d/e/q/.."), {"d": D, "d/e": D, "d/e/q": L("../..")},
                 "outside the install", id="chain-link-points-shallower"),
    pytest.param(Member("p", "symlink", linkname="q/x"), {"q": L("/etc")}, "outside the install",
                 id="chain-through-absolute-link"),
    pytest.param(Member("p", "symlink", linkname="a"), {"a": L("b"), "b": L("a")}, "loops", id="link-loop"),
    pytest.param(Member("h", "hardlink", linkname="/etc/passwd"), {}, "hard link to '/etc/passwd', outside",
                 id="hardlink-absolute"),
    pytest.param(Member("h", "hardlink", linkname="../x"), {}, "outside the install", id="hardlink-climbs"),
    pytest.param(Member("h", "hardlink", linkname="later"), {}, "not a regular file earlier", id="hardlink-unknown"),
    pytest.param(Member("h", "hardlink", linkname="l"), {"l": L("a")}, "not a regular file earlier",
                 id="hardlink-to-link"),
    pytest.param(Member("h", "hardlink", linkname="d"), {"d": D}, "not a regular file earlier",
                 id="hardlink-to-dir"),
    pytest.param(Member("h", "hardlink", linkname="."), {}, "outside the install", id="hardlink-to-root"),
]


@pytest.mark.parametrize(("member", "tree", "fragment"), REFUSED)
def test_judge_refuses(member: Member, tree: dict[str, Entry], fragment: str) -> None:
    verdict = judge_member(member, tree)
    assert verdict.path is None
    assert verdict.fault is not None and fragment in verdict.fault


def test_judge_is_pure() -> None:
    tree = {"a": L("b")}
    judge_member(Member("c", "symlink", linkname="a"), tree)
    assert tree == {"a": L("b")}


def test_limits_allowance() -> None:
    limits = ExtractLimits(max_bytes=1000, max_ratio=10, ratio_floor=100)
    assert limits.allowance(5) == 100  # the floor
    assert limits.allowance(50) == 500  # the ratio
    assert limits.allowance(500) == 1000  # the cap


# --- real hostile archives ---------------------------------------------------------------------------

def _refused(area: Path, archive: Path, fragment: str, *, limits: ExtractLimits | None = None,
             error: type[Exception] = UnsafeArchive) -> Exception:
    before = snapshot(area)
    with pytest.raises(error, match=fragment) as info:
        extract_archive(archive, area / "stage" / "x", limits=limits)
    assert snapshot(area) == before, "something was written outside the destination, or it was left behind"
    return info.value


def _victim(area: Path) -> str:
    return str(area / "outside" / "victim")


@pytest.mark.parametrize(("entries", "fragment"), HOSTILE)
def test_hostile_tar_refused(area: Path, entries: list[E], fragment: str) -> None:
    fixed = [E(e.kind, e.name.format(area=area), e.data.format(area=area) if isinstance(e.data, str) else e.data,
               e.mode) for e in entries]
    archive = make_tar(area / "hostile.tar.gz", fixed)
    err = _refused(area, archive, fragment)
    assert isinstance(err, BadFile) and err.path == str(archive)
    assert (area / "outside" / "victim").read_text() == "precious\n"


def test_deep_nesting_refused_cleanly(area: Path) -> None:
    archive = make_tar(area / "deep.tar.gz", [E("file", "d/" * 1500 + "x", "x")])
    _refused(area, archive, "nests deeper than 128 directories")


def test_member_count_bomb(area: Path) -> None:
    archive = make_tar(area / "many.tar.gz", [E("file", f"f{i}", "") for i in range(11)])
    _refused(area, archive, "more than 10 members", limits=ExtractLimits(max_members=10))


def test_size_bomb_refused_before_writing(area: Path) -> None:
    archive = area / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        ti = tarfile.TarInfo("zeros")
        ti.size = 64 << 20
        tar.addfile(ti, io.BytesIO(bytes(ti.size)))
    assert archive.stat().st_size < 1 << 20  # a real bomb: ~64 MiB of zeros in well under 1 MiB
    _refused(area, archive, "would unpack to more than", limits=ExtractLimits(max_ratio=20, ratio_floor=1 << 20))


def test_total_cap(area: Path) -> None:
    archive = make_tar(area / "big.tar.gz", [E("file", "a", b"x" * 600), E("file", "b", b"y" * 600)])
    _refused(area, archive, "more than 1000 bytes", limits=ExtractLimits(max_bytes=1000, ratio_floor=1000))


def test_truncated_archive_is_bad_file(area: Path) -> None:
    full = make_tar(area / "full.tar.gz", [E("file", "big", os.urandom(200_000))])
    cut = area / "cut.tar.gz"
    cut.write_bytes(full.read_bytes()[:50_000])
    full.unlink()
    err = _refused(area, cut, "not a readable archive|holds .* bytes, not the", error=BadFile)
    assert not isinstance(err, UnsafeArchive)


def test_not_an_archive_is_bad_file(area: Path) -> None:
    junk = area / "junk.tar.gz"
    junk.write_bytes(gzip.compress(b"this is not a tar file" * 10))
    _refused(area, junk, "not a readable archive", error=BadFile)


# --- what lands ---------------------------------------------------------------------------------------

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


def test_no_descend_keeps_top(area: Path) -> None:
    archive = make_tar(area / "good.tar.gz", GOOD)
    root = extract_archive(archive, area / "stage" / "x", descend=False)
    assert root == area / "stage" / "x"
    assert (root / "pkg-1.0" / "lib" / "libx.so").is_symlink()


def test_descends_through_single_directories_ignoring_dot_entries(area: Path) -> None:
    archive = make_tar(area / "deep.tar.gz", [E("file", "._AppleDouble", "x"), E("file", "build/bin/libllama.so", "L"),
                                              E("file", "build/bin/llama-cli", "C")])
    root = extract_archive(archive, area / "stage" / "x")
    assert root == area / "stage" / "x" / "build" / "bin"
    assert sorted(os.listdir(root)) == ["libllama.so", "llama-cli"]


def test_uncompressed_and_xz_tars(area: Path) -> None:
    for mode, suffix in (("w", "tar"), ("w:xz", "tar.xz"), ("w:bz2", "tar.bz2")):
        archive = make_tar(area / f"a.{suffix}", [E("file", "a", "1")], mode=mode)
        root = extract_archive(archive, area / "stage" / suffix)
        assert (root / "a").read_text() == "1"


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
        _refused(area, make_zip(area / f"hostile{i}.zip", entries), fragment)


# --- zip members and tars on disk, through the inflater -----------------------------------------------

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

    monkeypatch.setattr(extract, "raw_inflater", spy)
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
    monkeypatch.setattr(extract, "_zip_opener", lambda zf, zi, archive: lambda: zf.open(zi))
    theirs = [_zip_outcome(a, area / "stage" / f"theirs-{i}") for i, a in enumerate(archives)]
    for archive, a, b in zip(archives, ours, theirs, strict=True):
        if isinstance(a, tuple) and isinstance(b, tuple) and "decompressing" in b[1]:
            assert a[0] is b[0] and "not a readable archive" in a[1], archive.name  # the inflater's own words
        else:
            assert a == b, archive.name
    assert [isinstance(o, dict) for o in ours] == [True, True, False, False, False, False, False, False]
    # nothing is left of the refused ones
    assert sorted(os.listdir(area / "stage")) == ["ours-0", "ours-1", "theirs-0", "theirs-1"]


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
    _refused(area, archive, "climbs with '..'")
    assert threading.active_count() == before


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


def test_merge_never_writes_into_a_link(tmp_path: Path) -> None:
    dst, src = tmp_path / "dst", tmp_path / "src"
    (tmp_path / "elsewhere").mkdir()
    dst.mkdir()
    (dst / "d").symlink_to(tmp_path / "elsewhere")
    (src / "d").mkdir(parents=True)
    (src / "d" / "x").write_text("x")
    merge_tree(src, dst)
    assert os.listdir(tmp_path / "elsewhere") == []


def test_check_tree_refuses_special_files_and_setuid(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    os.mkfifo(tmp_path / "t" / "p")
    with pytest.raises(UnsafeArchive, match="'p' is a FIFO"):
        check_tree(tmp_path / "t", "label")
    os.unlink(tmp_path / "t" / "p")
    (tmp_path / "t" / "s").write_text("s")
    os.chmod(tmp_path / "t" / "s", 0o4755)
    with pytest.raises(UnsafeArchive, match="setuid"):
        check_tree(tmp_path / "t", "label")


def test_destination_must_be_new(tmp_path: Path) -> None:
    from superfluid.installer.unpack.extract import ExtractFailed

    archive = make_tar(tmp_path / "a.tar.gz", [E("file", "a", "1")])
    (tmp_path / "exists").mkdir()
    with pytest.raises(ExtractFailed, match="File exists"):
        extract_archive(archive, tmp_path / "exists")


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
