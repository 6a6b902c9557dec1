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
# header naming its kind (1: PTX, 2: an ELF cubin; others, such as LTO IR, are not code a GPU runs),
# its architecture (90 for ``sm_90``) and its flags. Only the headers are read (a compressed payload
# is never unpacked).
__all__ = ["FATBIN_MAGIC", "SECTION", "section", "entries", "kernels_of_file"]

FATBIN_MAGIC = 0xBA55ED50
SECTION = ".nv_fatbin"
_PTX, _CUBIN = 1, 2
_MAX_SECTION = 4 << 30  # a section larger than 4 GiB is not one a loader maps
# An entry's header, as far as it is read (real ones are 64 or 80 bytes): kind, version, header size,
# payload size, 12 bytes (sizes, the code or PTX version), the architecture, 8 bytes (the entry's
# name), the flags.
_ENTRY = struct.Struct("<HHIQ12xI8xQ")
# The flags that spell the architecture's suffix, as cuobjdump's ``arch =`` line does (found by building
# each target with nvcc 13.0 and flipping each bit under cuobjdump 13.5): ``sm_90a`` (arch-specific),
# ``sm_100f`` (family-specific); with both set cuobjdump says ``a``. The other bits seen say 64-bit
# (0x1), debug (0x2), Linux (0x10), a compressed payload (0x2000, 0x8000) and, on cubins from
# ``sm_100`` on, 0x1000000; they name no architecture and are not read.
_ARCH_SPECIFIC, _FAMILY_SPECIFIC = 0x100000, 0x200000


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


def _arch(arch: int, flags: int) -> str:
    """``sm_90``, ``sm_90a`` or ``sm_100f``: cuobjdump's name for architecture ``arch`` with ``flags``."""
    suffix = "a" if flags & _ARCH_SPECIFIC else "f" if flags & _FAMILY_SPECIFIC else ""
    return f"sm_{arch}{suffix}"


def entries(blob: bytes) -> list[tuple[str, str]]:
    """``(kind, sm_XX)`` of each entry of the fat binaries in ``blob``, kind ``cubin`` or ``ptx``, in order.

    The architecture keeps its suffix (``sm_90a``, ``sm_100f``), for PTX too, as cuobjdump names it.

    Raises:
        ELFInvalid: a fat binary whose sizes run past the section; an entry header too short to hold
            the flags.
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
        while at + 16 <= end:  # an entry's kind and sizes
            entry_header, = struct.unpack_from("<I", blob, at + 4)
            if entry_header < _ENTRY.size or at + entry_header > end:
                raise ELFInvalid(f"a fat binary entry with a short header ({entry_header} bytes, {end - at} "
                                 f"left; its flags end at byte {_ENTRY.size})")
            kind, _v, _h, payload, arch, flags = _ENTRY.unpack_from(blob, at)
            if kind in (_PTX, _CUBIN):
                out.append(("ptx" if kind == _PTX else "cubin", _arch(arch, flags)))
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
