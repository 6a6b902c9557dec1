"""``runtime/elf``: the ELF reader against real files (this machine's C and C++ libraries, the real
libllama builds of the native cache) and broken ones (bad magic, truncated, tables outside the file)."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.elf import ELFFile, ELFInvalid, elf_hash, is_elf, read, remember, remembered
from superfluid.runtime.hostfacts.libraries import newest
from tests.runtime.fake_roots import real_library


@pytest.fixture(scope="module")
def libc() -> Path:
    return Path(real_library("libc.so.6"))


@pytest.fixture(scope="module")
def libstdcxx() -> Path:
    return Path(real_library("libstdc++.so.6"))


def test_libc_defines_the_running_glibc_and_needs_no_glibc_of_its_own(libc: Path) -> None:
    obj = read(libc)
    assert obj.soname == "libc.so.6" and obj.capacity in (32, 64) and obj.encoding in ("little", "big")
    assert obj.arch in ("x64", "arm64")
    stated = os.confstr("CS_GNU_LIBC_VERSION")
    assert stated is not None and newest(obj.version_definitions, "GLIBC_") == stated.split()[1]
    assert "libc.so.6" not in obj.needed


def test_libstdcxx_defines_glibcxx_and_needs_glibc(libstdcxx: Path) -> None:
    obj = read(libstdcxx)
    assert obj.soname == "libstdc++.so.6" and "libc.so.6" in obj.needed
    assert newest(obj.version_definitions, "GLIBCXX_") is not None
    assert newest(obj.version_definitions, "CXXABI_") is not None
    assert {n.file for n in obj.version_needs} >= {"libc.so.6"}


def test_every_need_s_hash_is_the_elf_hash_of_its_name(libstdcxx: Path, libllama_v1: Path) -> None:
    for path in (libstdcxx, libllama_v1 / "libllama.so"):
        needs = read(path).version_needs
        assert needs and all(n.hash == elf_hash(n.name.encode()) for n in needs)


def test_libllama_s_needs(libllama_each: Path) -> None:
    """The real builds: what readelf -d -V shows of them (notes/llamacpp.md: built on this machine's
    distribution, GGML_NATIVE=OFF, RPATH $ORIGIN)."""
    obj = read(libllama_each / "libllama.so")  # the link is followed, as the loader follows it
    assert obj.soname == "libllama.so.0"
    assert {"libggml.so.0", "libggml-base.so.0", "libstdc++.so.6", "libc.so.6"} <= set(obj.needed)
    by_library = {n.file for n in obj.version_needs}
    assert {"libc.so.6", "libstdc++.so.6"} <= by_library
    assert newest((n.name for n in obj.version_needs if n.file == "libc.so.6"), "GLIBC_") == "2.34"
    assert obj.version_definitions == ()
    entry = next(n for n in obj.version_needs if n.name == "GLIBC_2.34")
    raw = (libllama_each / "libllama.so").resolve().read_bytes()
    assert raw[entry.name_offset:entry.name_offset + 11] == b"GLIBC_2.34\0"
    assert struct.unpack_from("<I", raw, entry.offset)[0] == elf_hash(b"GLIBC_2.34")


def test_a_program_reads_too() -> None:
    obj = read("/bin/sh")
    assert obj.soname is None and "libc.so.6" in obj.needed


@pytest.mark.parametrize(("data", "fault"), [
    pytest.param(b"", "lies outside the file", id="empty"),
    pytest.param(b"MZ\x90\x00" + bytes(60), "bad magic", id="bad-magic"),
    pytest.param(b"\x7fELF\x03\x01" + bytes(58), "unknown class", id="unknown-class"),
    pytest.param(b"\x7fELF\x02\x07" + bytes(58), "unknown class 2 or data encoding 7", id="unknown-encoding"),
    pytest.param(b"\x7fELF\x02\x01\x01" + bytes(9) + bytes(10), "the file header", id="short-header"),
])
def test_broken_headers(data: bytes, fault: str) -> None:
    with pytest.raises(ELFInvalid, match=fault):
        ELFFile(io.BytesIO(data))


def test_a_truncated_library_is_invalid(libstdcxx: Path, tmp_path: Path) -> None:
    data = libstdcxx.read_bytes()
    for cut in (40, 100, 4096, len(data) // 2):
        (tmp_path / "cut.so").write_bytes(data[:cut])
        with pytest.raises(ELFInvalid, match="outside the file|no loaded segment|no end"):
            read(tmp_path / "cut.so")


def _header64(phoff: int = 64, phnum: int = 1, phentsize: int = 56) -> bytes:
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, phentsize, phnum, 64, 0, 0)


def _phdr(p_type: int, offset: int, vaddr: int, filesz: int) -> bytes:
    return struct.pack("<IIQQQQQQ", p_type, 4, offset, vaddr, vaddr, filesz, filesz, 8)


def test_a_dynamic_segment_outside_the_file_is_invalid() -> None:
    data = _header64() + _phdr(2, 1 << 20, 0, 160)
    with pytest.raises(ELFInvalid, match="the dynamic segment .* lies outside the file"):
        ELFFile(io.BytesIO(data))


def test_a_string_table_in_no_loaded_segment_is_invalid() -> None:
    dynamic = struct.pack("<qQqQqQ", 5, 0x9999, 10, 16, 0, 0)  # DT_STRTAB at an address nothing maps
    data = _header64(phnum=1) + _phdr(2, 120, 0, len(dynamic)) + dynamic
    with pytest.raises(ELFInvalid, match="no loaded segment"):
        ELFFile(io.BytesIO(data))


def test_a_needed_name_outside_the_string_table_is_invalid() -> None:
    strtab = b"\0libx.so\0"
    dynamic = struct.pack("<qQqQqQqQ", 5, 0x1000, 10, len(strtab), 1, 500, 0, 0)  # DT_NEEDED at 500
    body_at = 64 + 2 * 56
    data = _header64(phnum=2) + _phdr(1, body_at, 0x1000, len(strtab)) + _phdr(2, body_at + len(strtab), 0,
                                                                                len(dynamic))
    with pytest.raises(ELFInvalid, match="string 500 is outside the string table"):
        ELFFile(io.BytesIO(data + strtab + dynamic))


def test_a_small_object_reads_its_needed_names() -> None:
    strtab = b"\0libx.so.1\0liby.so\0"
    dynamic = struct.pack("<qQqQqQqQqQ", 5, 0x1000, 10, len(strtab), 1, 1, 14, 11, 0, 0)
    body_at = 64 + 2 * 56
    data = _header64(phnum=2) + _phdr(1, body_at, 0x1000, len(strtab)) + _phdr(2, body_at + len(strtab), 0,
                                                                                len(dynamic))
    obj = ELFFile(io.BytesIO(data + strtab + dynamic))
    assert (obj.needed, obj.soname, obj.version_needs, obj.version_definitions) == (("libx.so.1",), "liby.so", (), ())


def test_too_many_program_headers_are_not_trusted() -> None:
    with pytest.raises(ELFInvalid, match="program headers"):
        ELFFile(io.BytesIO(_header64(phnum=60000)))


def test_is_elf_follows_no_link(libc: Path, tmp_path: Path) -> None:
    assert is_elf(libc.resolve())
    os.symlink(libc.resolve(), tmp_path / "link.so")
    (tmp_path / "text.so").write_text("INPUT(-lc)\n" * 10)  # a linker script named as a library
    assert not is_elf(tmp_path / "link.so") and not is_elf(tmp_path / "text.so") and not is_elf(tmp_path / "no")


def test_an_unreadable_path_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(ELFInvalid, match="cannot read"):
        read(tmp_path / "absent.so")


@pytest.mark.parametrize(("name", "value"), [(b"", 0), (b"GLIBC_2.2.5", 0x09691A75), (b"GLIBCXX_3.4", 0x08922974)])
def test_elf_hash(name: bytes, value: int) -> None:
    assert elf_hash(name) == value


class TestRemember:
    """``remember``: a file's facts read as it is written, answered by ``read`` while it is unchanged."""

    def test_a_remembered_file_is_not_read_again(self, libstdcxx: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        copy = tmp_path / "libstdc++.so.6"
        copy.write_bytes(libstdcxx.read_bytes())
        remember(copy)
        moved = tmp_path / "moved.so"
        copy.rename(moved)  # a rename keeps the file: what merge_tree does after the extraction
        made: list[object] = []
        monkeypatch.setattr(ELFFile, "__init__", lambda self, f: made.append(f))
        assert read(moved).soname == "libstdc++.so.6" and made == []

    def test_a_file_changed_since_is_read_again(self, libc: Path, libstdcxx: Path, tmp_path: Path) -> None:
        path = tmp_path / "lib.so"
        path.write_bytes(libstdcxx.read_bytes())
        remember(path)
        path.write_bytes(libc.read_bytes())  # rewritten in place: another size and modification time
        assert read(path).soname == "libc.so.6"

    def test_what_is_not_elf_is_not_remembered_and_read_says_why(self, tmp_path: Path) -> None:
        path = tmp_path / "fake.so"
        path.write_bytes(b"not an ELF object" * 10)
        remember(path)  # never raises
        with pytest.raises(ELFInvalid, match="bad magic"):
            read(path)

    def test_remembered_answers_the_kept_facts_only_while_the_file_is_unchanged(self, libstdcxx: Path,
                                                                                tmp_path: Path) -> None:
        path = tmp_path / "libstdc++.so.6"
        path.write_bytes(libstdcxx.read_bytes())
        assert remembered(path) is None  # never remembered
        remember(path)
        kept = remembered(path)
        assert kept is not None and kept.soname == "libstdc++.so.6"
        with path.open("ab") as f:
            f.write(b"\0" * 16)  # appended to: another size
        assert remembered(path) is None
        assert remembered(tmp_path / "missing.so") is None
