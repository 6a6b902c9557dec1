"""The zip reader: a zip's members from its central directory, deflate data through the inflater.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
from collections.abc import Iterator
from typing import IO, cast

from superfluid.installer.unpack.inflate import crc32, raw_inflater
from superfluid.installer.unpack.rules import Member, Members, Opener

__all__ = ["is_zip", "zip_members"]

_CHUNK = 1 << 20  # bytes read at a time, and of inflated output per step
_ZIP_HEADER = struct.Struct("<4s22xHH")  # a zip member's local header: signature, ..., name and extra lengths


def is_zip(path: str) -> bool:
    """Whether the file at ``path`` is a zip, by its first bytes (a member's header, or an empty zip's end)."""
    with open(path, "rb") as f:
        return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")


class _ZipContent:
    """A zip member's bytes, its deflate data inflated by ``inflate``'s inflater (ISA-L where it is
    installed; zipfile's reader would use the standard library's), as ``zipfile`` reads them: the
    member opened by zipfile first (its checks of the local header: the name agrees with the
    directory's, no encryption or patch data), at most the declared size given, the CRC-32 checked
    once the data ends or the declared size is reached."""

    def __init__(self, zf: zipfile.ZipFile, zi: zipfile.ZipInfo, archive: str) -> None:
        self._zf, self._zi, self._archive = zf, zi, archive

    def pieces(self) -> Iterator[memoryview]:
        zi = self._zi
        with self._zf.open(zi):  # zipfile's checks of the local header, and its refusals
            pass
        left, crc = zi.file_size, 0
        if left:
            for piece in self._data():
                piece = piece[:left]  # a member longer than it declares: zipfile gives its declared size
                left -= len(piece)
                crc = crc32(piece, crc)
                if not left:  # the last piece is given only once the CRC-32 is right, as zipfile does
                    self._check(crc)
                    yield memoryview(piece)
                    return
                yield memoryview(piece)
        self._check(crc)

    def _check(self, crc: int) -> None:
        if crc != self._zi.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {self._zi.filename!r}")

    def _data(self) -> Iterator[bytes]:
        """The member's bytes as they come out of the inflater, at most ``_CHUNK`` at a time."""
        zi = self._zi
        with open(self._archive, "rb") as f:
            f.seek(zi.header_offset)
            header = f.read(_ZIP_HEADER.size)
            if len(header) != _ZIP_HEADER.size:
                raise zipfile.BadZipFile("Truncated file header")
            magic, name_length, extra_length = _ZIP_HEADER.unpack(header)
            if magic != b"PK\x03\x04":
                raise zipfile.BadZipFile("Bad magic number for file header")
            f.seek(name_length + extra_length, os.SEEK_CUR)
            inflater = raw_inflater() if zi.compress_type == zipfile.ZIP_DEFLATED else None
            left = zi.compress_size
            while left > 0 and (chunk := f.read(min(left, _CHUNK))):
                left -= len(chunk)
                if inflater is None:
                    yield chunk
                    continue
                while chunk and not inflater.eof:
                    out = inflater.decompress(chunk, _CHUNK)
                    chunk = inflater.unconsumed_tail
                    if out:
                        yield out
            if left > 0:
                raise EOFError("the archive ends inside a member's data")
            while inflater is not None and not inflater.eof and (out := inflater.decompress(b"", _CHUNK)):
                yield out  # what the inflater still held when its input ran out (zipfile's flush)

    def __enter__(self) -> _ZipContent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _zip_opener(zf: zipfile.ZipFile, zi: zipfile.ZipInfo, archive: str) -> Opener:
    if zi.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) and not zi.flag_bits & 0x1:
        return lambda: cast("IO[bytes]", _ZipContent(zf, zi, archive))
    return lambda: zf.open(zi)  # bzip2, lzma, encrypted: zipfile's own reader (and its refusals)


def zip_members(archive: str) -> Members:
    """The members of the zip ``archive`` in its central directory's order, each kind and mode read
    from the Unix bits of its external attributes (none, as a zip made on Windows has: a file).

    Raises:
        zipfile.BadZipFile, EOFError, the inflater's error: the archive is broken, found as it is read.
    """
    with zipfile.ZipFile(archive) as zf:
        for zi in zf.infolist():
            unix = zi.external_attr >> 16
            fmt = stat.S_IFMT(unix)
            if zi.is_dir():
                kind = "dir"
            elif fmt == stat.S_IFLNK:
                kind = "symlink"
            elif fmt in (0, stat.S_IFREG):
                kind = "file"
            else:
                kind = {stat.S_IFCHR: "chardev", stat.S_IFBLK: "blockdev", stat.S_IFIFO: "fifo"}.get(fmt, "other")
            linkname = ""
            if kind == "symlink":
                with zf.open(zi) as f:
                    linkname = f.read(4097).decode("utf-8", "surrogateescape")
            mode = (unix & 0o7777) or (0o755 if kind == "dir" else 0o644)
            member = Member(zi.filename, kind, zi.file_size, mode, linkname)
            yield member, (_zip_opener(zf, zi, archive) if kind == "file" else None), None
