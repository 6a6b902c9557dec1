"""Fake roots laid out as distributions lay out their libraries, for ``SUPERFLUID_HOST_ROOT``.

Each is a folder holding what the host probes read: the C library (this machine's real
``libc.so.6``, linked, on glibc layouts; musl's loader on Alpine's), the real ``libstdc++.so.6``
(its version definitions are read), the Vulkan loader and an ICD file where the distribution has
them, and ``/proc/cpuinfo``. Libraries other than libc and libstdc++ are empty files: only their
presence is probed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

from superfluid.runtime.hostfacts.host import detect

__all__ = ["LAYOUTS", "X64", "I386", "lay_out", "real_library", "cpuinfo", "ld_cache", "write_ld_cache"]

#: the flags of a cache entry of an x86-64 library, and of a 32-bit x86 one (``ldconfig -p``'s
#: ``(libc6,x86-64)`` and ``(libc6)``)
X64, I386 = 0x0303, 0x0003

#: distribution -> the folder its libraries lie in (``/lib64`` or ``/lib`` linking there), and the
#: extra libraries and ICD files it has
LAYOUTS: dict[str, dict[str, object]] = {
    "debian": {"lib": "usr/lib/x86_64-linux-gnu", "links": {"lib": "usr/lib"}, "libs": (), "icd": ()},
    "fedora": {"lib": "usr/lib64", "links": {"lib64": "usr/lib64", "lib": "usr/lib"},
               "libs": ("libvulkan.so.1", "libgomp.so.1"), "icd": ("intel_icd.x86_64.json",)},
    "arch": {"lib": "usr/lib", "links": {"lib": "usr/lib", "lib64": "usr/lib"},
             "libs": ("libvulkan.so.1", "libcuda.so.1", "libgomp.so.1"), "icd": ("nvidia_icd.json",)},
    "alpine": {"lib": "usr/lib", "links": {}, "libs": ("libgomp.so.1",), "icd": ()},
}


def real_library(name: str) -> str:
    """Where this machine's loader finds ``name`` (``libc.so.6``, ``libstdc++.so.6``)."""
    found = detect({}).found(name)
    assert found is not None, f"this machine has no {name}"
    return found


def cpuinfo(arch: str = "x64") -> str:
    """A ``/proc/cpuinfo`` of one processor of ``arch``."""
    if arch == "arm64":
        return ("processor\t: 0\nBogoMIPS\t: 50.00\n"
                "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
                "lrcpc dcpop asimddp\nCPU implementer\t: 0x41\n\n")
    return ("processor\t: 0\nvendor_id\t: GenuineIntel\n"
            "flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2\n\n")


def lay_out(root: Path, distro: str, *, arch: str = "x64") -> Path:
    """``root`` laid out as ``distro`` (``LAYOUTS``) of ``arch``; ``root``."""
    layout = LAYOUTS[distro]
    lib = root / str(layout["lib"])
    lib.mkdir(parents=True)
    for link, target in dict(layout["links"]).items():  # type: ignore[call-overload]
        if not (root / link).exists():
            os.symlink(target, root / link)
    if distro == "alpine":
        triplet = "x86_64" if arch == "x64" else "aarch64"
        (root / "lib").mkdir(exist_ok=True)
        (root / "lib" / f"ld-musl-{triplet}.so.1").write_bytes(b"")
        os.symlink(f"ld-musl-{triplet}.so.1", root / "lib" / f"libc.musl-{triplet}.so.1")
    else:
        os.symlink(real_library("libc.so.6"), lib / "libc.so.6")
    os.symlink(real_library("libstdc++.so.6"), lib / "libstdc++.so.6")
    for name in layout["libs"]:  # type: ignore[attr-defined]
        (lib / name).write_bytes(b"")
    for name in layout["icd"]:  # type: ignore[attr-defined]
        icd = root / "usr" / "share" / "vulkan" / "icd.d"
        icd.mkdir(parents=True, exist_ok=True)
        (icd / name).write_text('{"file_format_version": "1.0.0", "ICD": {"library_path": "libdriver.so"}}\n')
    (root / "proc").mkdir()
    (root / "proc" / "cpuinfo").write_text(cpuinfo(arch))
    return root


def ld_cache(entries: Sequence[tuple[str, str, int]]) -> bytes:
    """The bytes of a glibc ``ld.so.cache`` (the ``glibc-ld.so.cache1.1`` table, as ``ldconfig``
    writes it) listing ``(name, path, flags)`` in order."""
    header, entry = struct.Struct("=20sIIB3xI12x"), struct.Struct("=iIIIQ")
    strings = b""
    offsets = []
    first = header.size + entry.size * len(entries)
    for name, path, _ in entries:
        at = first + len(strings)
        strings += name.encode() + b"\0"
        offsets.append((at, first + len(strings)))
        strings += path.encode() + b"\0"
    table = b"".join(entry.pack(flags, key, value, 0, 0)
                     for (_, _, flags), (key, value) in zip(entries, offsets, strict=True))
    return header.pack(b"glibc-ld.so.cache1.1", len(entries), len(strings), 0, 0) + table + strings


def write_ld_cache(root: Path, entries: Sequence[tuple[str, str, int]]) -> Path:
    """``root/etc/ld.so.cache`` listing ``entries`` (``ld_cache``); its path."""
    cache = root / "etc" / "ld.so.cache"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(ld_cache(entries))
    return cache
