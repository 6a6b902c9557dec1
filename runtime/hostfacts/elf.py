"""A small ELF reader (``struct`` only): what a shared object tells the dynamic loader it needs.

See docs/install.md, "What a build needs".
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import IO

from superfluid.runtime.kernel.home_cache import Written
from superfluid.runtime.kernel.jsonread import open_regular

__all__ = ["ELFInvalid", "ELFFile", "VersionNeed", "elf_hash", "is_elf", "MACHINES", "read", "remember", "remembered"]

_MAGIC = b"\x7fELF"
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME = 0, 1, 5, 10, 14
_DT_VERDEF, _DT_VERDEFNUM, _DT_VERNEED, _DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
_VER_FLG_BASE = 1  # a version definition that names the file itself, not a version
#: bounds on what one object may state (glibc's libc.so.6 defines ~45 versions, libstdc++ ~60)
_MAX_ENTRIES = 4096
_MAX_NAME = 4096  # bytes of one string

#: ``e_machine`` -> the architecture as a platform names it
MACHINES = {62: "x64", 183: "arm64", 3: "x86", 40: "arm"}


class ELFInvalid(ValueError):
    """The file is not an ELF object this reader can read; the message says why."""


def elf_hash(name: bytes) -> int:
    """The System V ELF hash of ``name``, as ``vna_hash`` and ``vd_hash`` hold it.

    >>> hex(elf_hash(b"GLIBC_2.34"))
    '0x69691b4'
    """
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def is_elf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts as an ELF object does (no link followed)."""
    try:
        with open_regular(path, follow=False) as f:
            return os.fstat(f.fileno()).st_size >= 64 and f.read(4) == _MAGIC
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class VersionNeed:
    """One version an object needs from one library (a ``Vernaux`` entry): ``GLIBC_2.34`` from
    ``libc.so.6``. ``offset`` is where its entry sits in the file and ``name_offset`` where its name
    does (a test raises a need in place through them)."""

    file: str
    name: str
    hash: int
    offset: int
    name_offset: int


class ELFFile:
    """The dynamic facts of one ELF object, read once from ``f`` (a binary file that can seek).

    In the style of packaging's ``_elffile``. The dynamic segment is found as the loader finds it
    (program headers, not section headers: a stripped object reads the same), and answers
    ``needed`` (``DT_NEEDED``), ``soname``, ``version_needs`` (``.gnu.version_r``: ``GLIBC_2.34``
    from ``libc.so.6``) and ``version_definitions`` (``.gnu.version_d``: the ``GLIBCXX_3.4.30`` a
    ``libstdc++.so.6`` provides). Every offset is checked against the file before it is read and
    every chain is bounded by its stated count: a hostile or truncated file is an ``ELFInvalid``.

    Raises:
        ELFInvalid: not an ELF object, or a header, segment, table or string outside the file.
    """

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        f.seek(0, os.SEEK_END)
        self.size = f.tell()
        ident = self._read(0, 16, "the identification")
        if ident[:4] != _MAGIC:
            raise ELFInvalid(f"bad magic {ident[:4]!r}: not an ELF object")
        self.capacity = {1: 32, 2: 64}.get(ident[4])
        self.encoding = {1: "little", 2: "big"}.get(ident[5])
        if self.capacity is None or self.encoding is None:
            raise ELFInvalid(f"unknown class {ident[4]} or data encoding {ident[5]}")
        self._e = "<" if self.encoding == "little" else ">"
        wide = self.capacity == 64
        header = self._read(16, 48 if wide else 36, "the file header")
        (self.type, self.machine, _, _, phoff, _, self.flags, _, phentsize, phnum) = struct.unpack(
            self._e + ("HHIQQQIHHH" if wide else "HHIIIIIHHH"), header[:42 if wide else 30])
        self.arch = MACHINES.get(self.machine)
        self._segments = self._program_headers(phoff, phentsize, phnum)
        self._dynamic = self._dynamic_entries()
        self._strtab = self._string_table()
        self.needed: tuple[str, ...] = tuple(self._string(v) for t, v in self._dynamic if t == _DT_NEEDED)
        soname = next((v for t, v in self._dynamic if t == _DT_SONAME), None)
        self.soname: str | None = self._string(soname) if soname is not None else None
        self.version_needs: tuple[VersionNeed, ...] = self._version_needs()
        self.version_definitions: tuple[str, ...] = self._version_definitions()

    # -- reading, bounded -------------------------------------------------------------------------

    def _read(self, offset: int, n: int, what: str) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise ELFInvalid(f"{what} ({n} bytes at {offset}) lies outside the file of {self.size} bytes: truncated?")
        self._f.seek(offset)
        data = self._f.read(n)
        if len(data) != n:
            raise ELFInvalid(f"{what}: read {len(data)} of {n} bytes")
        return data

    def _program_headers(self, phoff: int, phentsize: int, phnum: int) -> list[tuple[int, int, int, int]]:
        """``(type, offset, vaddr, filesz)`` of each program header."""
        wide = self.capacity == 64
        fmt, need = (self._e + "IIQQQQ", 40) if wide else (self._e + "IIIII", 20)
        if phnum > _MAX_ENTRIES or (phnum and phentsize < need):
            raise ELFInvalid(f"{phnum} program headers of {phentsize} bytes is not a table this reader trusts")
        out = []
        for i in range(phnum):
            raw = self._read(phoff + i * phentsize, need, f"program header {i}")
            if wide:
                p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack(fmt, raw)
            else:
                p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack(fmt, raw)
            out.append((p_type, p_offset, p_vaddr, p_filesz))
        return out

    def _dynamic_entries(self) -> list[tuple[int, int]]:
        dynamic = next((s for s in self._segments if s[0] == _PT_DYNAMIC), None)
        if dynamic is None:
            return []  # a static executable or an object file: it names nothing
        _, offset, _, filesz = dynamic
        fmt = self._e + ("qQ" if self.capacity == 64 else "iI")
        width = struct.calcsize(fmt)
        raw = self._read(offset, min(filesz, _MAX_ENTRIES * width) // width * width, "the dynamic segment")
        out = []
        for tag, value in struct.iter_unpack(fmt, raw):
            if tag == _DT_NULL:
                break
            out.append((tag, value))
        return out

    def _offset_of(self, vaddr: int, what: str) -> int:
        """The file offset of address ``vaddr`` (the ``PT_LOAD`` segment that maps it)."""
        for p_type, offset, start, filesz in self._segments:
            if p_type == _PT_LOAD and start <= vaddr < start + filesz:
                return offset + (vaddr - start)
        raise ELFInvalid(f"{what} at address {vaddr:#x} is in no loaded segment")

    def _tag(self, tag: int) -> int | None:
        return next((v for t, v in self._dynamic if t == tag), None)

    def _string_table(self) -> tuple[int, int]:
        addr, size = self._tag(_DT_STRTAB), self._tag(_DT_STRSZ)
        if addr is None:
            return 0, 0
        offset = self._offset_of(addr, "the string table")
        size = size if size is not None else self.size - offset
        if offset + size > self.size:
            raise ELFInvalid(f"the string table ({size} bytes at {offset}) lies outside the file: truncated?")
        return offset, size

    def _string(self, index: int) -> str:
        return self._string_at(index)[0].decode("utf-8", "replace")

    def _string_at(self, index: int) -> tuple[bytes, int]:
        """The string at ``index`` of the dynamic string table, and its file offset."""
        start, size = self._strtab
        if not 0 <= index < size:
            raise ELFInvalid(f"string {index} is outside the string table of {size} bytes")
        raw = self._read(start + index, min(_MAX_NAME, size - index), "a string")
        end = raw.find(b"\0")
        if end < 0:
            raise ELFInvalid(f"string {index} of the string table has no end within {_MAX_NAME} bytes")
        return raw[:end], start + index

    # -- symbol versions --------------------------------------------------------------------------

    def _version_needs(self) -> tuple[VersionNeed, ...]:
        addr, count = self._tag(_DT_VERNEED), self._tag(_DT_VERNEEDNUM) or 0
        if addr is None:
            return ()
        if count > _MAX_ENTRIES:
            raise ELFInvalid(f"{count} version needs is more than this reader trusts")
        out: list[VersionNeed] = []
        at = self._offset_of(addr, "the version needs")
        for _ in range(count):
            _, cnt, file_, aux, nxt = struct.unpack(self._e + "HHIII", self._read(at, 16, "a version need"))
            library = self._string(file_)
            entry = at + aux
            for _ in range(min(cnt, _MAX_ENTRIES)):
                hash_, _, _, name, anext = struct.unpack(self._e + "IHHII", self._read(entry, 16, "a version need"))
                text, where = self._string_at(name)
                out.append(VersionNeed(library, text.decode("utf-8", "replace"), hash_, entry, where))
                if len(out) > _MAX_ENTRIES:
                    raise ELFInvalid(f"more than {_MAX_ENTRIES} version needs")
                if not anext:
                    break
                entry += anext
            if not nxt:
                break
            at += nxt
        return tuple(out)

    def _version_definitions(self) -> tuple[str, ...]:
        addr, count = self._tag(_DT_VERDEF), self._tag(_DT_VERDEFNUM) or 0
        if addr is None:
            return ()
        if count > _MAX_ENTRIES:
            raise ELFInvalid(f"{count} version definitions is more than this reader trusts")
        out = []
        at = self._offset_of(addr, "the version definitions")
        for _ in range(count):
            raw = self._read(at, 20, "a version definition")
            _, flags, _, cnt, _, aux, nxt = struct.unpack(self._e + "HHHHIII", raw)
            if cnt and not flags & _VER_FLG_BASE:
                (name,) = struct.unpack(self._e + "I", self._read(at + aux, 4, "a version definition's name"))
                out.append(self._string(name))
            if not nxt:
                break
            at += nxt
        return tuple(out)


#: the ELF facts of files this process wrote, read as they were written (the extractor's writer, on
#: its own thread): a file unchanged since is not read again (``home_cache.Written``)
_WRITTEN: Written[ELFFile] = Written()


def remember(path: str | os.PathLike[str]) -> None:
    """Read the ELF facts of the regular file just written at ``path`` (no link followed) for
    ``read`` to answer later without reading it again; nothing is kept for a file that is not an ELF
    object the loader could read (``read`` reads it again, and says why)."""
    try:
        with open_regular(path, follow=False) as f:
            st = os.fstat(f.fileno())
            facts = ELFFile(f)
    except (OSError, ELFInvalid):
        return
    _WRITTEN.keep(st, facts)


def remembered(path: str | os.PathLike[str]) -> ELFFile | None:
    """The facts ``remember`` kept of the file at ``path`` (a link followed) while it is unchanged
    since, else None: one ``stat``, no ``open`` (the check before a probe asks it of every file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _WRITTEN.get(st)


def read(path: str | os.PathLike[str]) -> ELFFile:
    """The ELF facts of the file at ``path`` (a link is followed: a library's soname link reads as it).

    Raises:
        ELFInvalid: as ``ELFFile``, or the file cannot be opened (the reason in words).
    """
    if (known := remembered(path)) is not None:
        return known
    try:  # a regular file only: a FIFO or a link to /dev/zero is refused, never waited on or read
        with open_regular(path, follow=True) as f:
            return ELFFile(f)
    except OSError as e:
        raise ELFInvalid(f"cannot read {os.fspath(path)}: {e.strerror or e}") from None
