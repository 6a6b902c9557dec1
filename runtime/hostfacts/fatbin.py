"""The GPU architectures a CUDA shared object carries: the cubin and PTX entries of its ``.nv_fatbin``.

See docs/install.md, "How a GPU build is chosen".
"""

from __future__ import annotations

import os
import struct

from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.kernels import Kernels
from superfluid.runtime.kernel.jsonread import open_regular

# A CUDA library's device code lies in its ``.nv_fatbin`` section: one or more fat binaries, each a
# header (magic ``0xBA55ED50``, its header size and the size of its entries) and entries, each with a
# header naming its kind (1: PTX, 2: an ELF cubin) and its ``sm_XX``. Only the headers are read (a
# compressed payload is never unpacked).
__all__ = ["FATBIN_MAGIC", "SECTION", "section", "entries", "kernels_of_file"]

FATBIN_MAGIC = 0xBA55ED50
SECTION = ".nv_fatbin"
_PTX, _CUBIN = 1, 2
_MAX_SECTION = 4 << 30  # a section larger than 4 GiB is not one a loader maps


def section(data: bytes, name: str = SECTION) -> bytes | None:
    """The bytes of section ``name`` of the 64-bit little-endian ELF file ``data``, or None.

    Raises:
        ELFInvalid: not such an ELF file, or its section headers lie outside it.
    """
    if data[:4] != b"\x7fELF" or len(data) < 64:
        raise ELFInvalid("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ELFInvalid("a CUDA library is a 64-bit little-endian ELF file; this is not")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        return None
    if shentsize < 64 or shoff + shentsize * shnum > len(data) or shstrndx >= shnum:
        raise ELFInvalid("section headers outside the file")
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = headers[shstrndx][4], headers[shstrndx][5]
    names = data[str_off:str_off + str_size]
    want = name.encode()
    for name_at, kind, _flags, _addr, offset, size in headers:
        end = names.find(b"\0", name_at)
        if names[name_at:end] == want and kind != 8:  # SHT_NOBITS has no bytes in the file
            if size > _MAX_SECTION or offset + size > len(data):
                raise ELFInvalid(f"section {name} lies outside the file")
            return data[offset:offset + size]
    return None


def entries(blob: bytes) -> list[tuple[str, str]]:
    """``(kind, sm_XX)`` of each entry of the fat binaries in ``blob``, kind ``cubin`` or ``ptx``, in order.

    Raises:
        ELFInvalid: a fat binary whose sizes run past the section.
    """
    out: list[tuple[str, str]] = []
    pos = 0
    while pos + 16 <= len(blob):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # padding between fat binaries
            continue
        start, end = pos + header_size, pos + header_size + fat_size
        if end > len(blob):
            raise ELFInvalid("a fat binary runs past its section")
        at = start
        while at + 32 <= end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", blob, at)
            arch, = struct.unpack_from("<I", blob, at + 28)
            if entry_header < 32:
                raise ELFInvalid("a fat binary entry with a short header")
            if kind in (_PTX, _CUBIN):
                out.append(("ptx" if kind == _PTX else "cubin", f"sm_{arch}"))
            at += entry_header + payload
        pos = (end + 7) & ~7
    return out


def kernels_of_file(path: str | os.PathLike[str]) -> Kernels:
    """The architectures of the cubins and PTX a CUDA shared object carries, each once, in order.

    Raises:
        ELFInvalid: as ``section`` and ``entries``.
        OSError: it cannot be read.
    """
    with open_regular(path, follow=True) as f:  # a regular file only: a FIFO or a device is never read
        data = f.read()
    blob = section(data)
    if blob is None:
        return Kernels()
    found = entries(blob)
    cubin = tuple(dict.fromkeys(a for k, a in found if k == "cubin"))
    ptx = tuple(dict.fromkeys(a for k, a in found if k == "ptx"))
    return Kernels(cubin, ptx)
