"""Where a host's shared libraries are, and what its C and C++ libraries define, read under a root.

See docs/install.md, "What a build needs".
"""

from __future__ import annotations

import glob
import os
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from superfluid.runtime.hostfacts.elf import ELFInvalid, read
from superfluid.runtime.kernel.jsonread import read_bytes

__all__ = ["MULTIARCH", "DEFAULT_DIRS", "under", "parse_ldconfig", "parse_ld_cache", "ldconfig", "library_dirs",
           "libraries_in", "libc_of", "glibc_defined", "libstdcxx_versions", "version_key", "newest"]

#: the Debian/Ubuntu multiarch folder name of each architecture
MULTIARCH = {"x64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
#: the folders searched after the cache, in the loader's order, then ``/usr/local/lib`` (where a
#: library built by hand lands; most distributions list it in ld.so.conf)
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib")
#: glibc's loader cache (elf/cache.c): the new table's magic and version, its header (magic+version,
#: entries, bytes of strings, flags and padding, extension offset, 3 unused words) and one entry (flags,
#: name and path offsets, OS version, hwcap bits), in the host's byte order
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_CACHE_HEADER = struct.Struct("=20sIIB3xI12x")
_CACHE_ENTRY = struct.Struct("=iIIIQ")
_CACHE_MAX_BYTES = 16 << 20
_LINE = re.compile(r"^\s+(\S+)\s+\([^)]*\)\s*=>\s*(?P<path>/\S.*?)\s*$")
_SONAME = re.compile(r"\.so(\.|$)")
_DOTTED = re.compile(r"\d+(\.\d+)*")  # a version of dotted numbers (asked of every symbol version: compiled once)


def under(root: str, path: str) -> str:
    """``path`` (absolute, on the host) as it lies under ``root``."""
    return path if root in ("", "/") else os.path.join(root, path.lstrip("/"))


def parse_ldconfig(text: str) -> list[tuple[str, str]]:
    """``(name, path)`` of each library ``ldconfig -p`` lists, in its order; other lines are skipped.

    >>> parse_ldconfig("2 libs found in cache\\n\\tlibvulkan.so.1 (libc6,x86-64) => /usr/lib64/libvulkan.so.1\\n")
    [('libvulkan.so.1', '/usr/lib64/libvulkan.so.1')]
    """
    out = []
    for line in text.splitlines():
        if m := _LINE.match(line):
            out.append((m.group(1), m.group("path")))
    return out


def ldconfig(root: str) -> list[tuple[str, str]]:
    """What ``ldconfig -p`` lists of the loader's cache under ``root`` (``<root>/etc/ld.so.cache``),
    read from the file itself (no ``ldconfig`` run: this is asked on every computed ``runtimes``),
    or nothing: no cache (musl has none), or not a cache of glibc's format."""
    try:
        data = read_bytes(under(root, "/etc/ld.so.cache"), max_bytes=_CACHE_MAX_BYTES)
    except OSError:
        return []
    return parse_ld_cache(data)


def parse_ld_cache(data: bytes) -> list[tuple[str, str]]:
    """``(name, path)`` of each library in the bytes of a glibc ``ld.so.cache``, in its order: the
    ``glibc-ld.so.cache1.1`` table (after the old ``ld.so-1.7.0`` one, where a cache carries both),
    whose entries hold offsets of their name and path from the table's start; nothing when there is
    no such table, or an entry points past the end."""
    start = data.find(_CACHE_MAGIC)
    if start < 0 or len(data) < start + _CACHE_HEADER.size:
        return []
    _magic, count, _strings, _flags, _ext = _CACHE_HEADER.unpack_from(data, start)
    first = start + _CACHE_HEADER.size
    if count > (len(data) - first) // _CACHE_ENTRY.size:
        return []
    out = []
    for i in range(count):
        _entry_flags, key, value, _os, _hwcap = _CACHE_ENTRY.unpack_from(data, first + i * _CACHE_ENTRY.size)
        name, path = _string(data, start + key), _string(data, start + value)
        if name and path and path.startswith("/"):
            out.append((name, path))
    return out


def _string(data: bytes, at: int) -> str | None:
    end = data.find(b"\0", at)
    return data[at:end].decode("utf-8", "replace") if 0 <= at < len(data) and end > at else None


def library_dirs(root: str, arch: str, ld_library_path: str | None,
                 cached: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The folders the loader finds libraries in, in its order, each once and only those that are
    there: ``LD_LIBRARY_PATH``, the folders of the libraries the cache lists (``cached``), the
    multiarch folders of ``arch``, then ``DEFAULT_DIRS``. Paths are the host's (not under ``root``)."""
    wanted = [p for p in (ld_library_path or "").split(os.pathsep) if p.startswith("/")]
    wanted += [os.path.dirname(path) for _, path in cached]
    triplet = MULTIARCH.get(arch)
    if triplet:
        wanted += [f"/lib/{triplet}", f"/usr/lib/{triplet}"]
    wanted += DEFAULT_DIRS
    seen: dict[str, None] = {}
    for folder in wanted:
        folder = os.path.normpath(folder)
        if folder not in seen and os.path.isdir(under(root, folder)):
            seen[folder] = None
    return tuple(seen)


def libraries_in(root: str, dirs: Iterable[str], cached: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Each library name (``*.so``, ``*.so.<N>``...) found in ``dirs`` or listed by the cache, and the
    host path the loader would take it from: the first folder that has it, the cache's entry after
    the folders ``LD_LIBRARY_PATH`` names (already first in ``dirs``)."""
    found: dict[str, str] = {}
    for folder in dirs:
        try:
            names = os.listdir(under(root, folder))
        except OSError:
            continue
        prefix = folder.rstrip("/") + "/"
        for name in names:  # names are unique in a folder: its order does not matter (this is asked often)
            if ".so" in name and name not in found and _SONAME.search(name):
                found[name] = prefix + name
    for name, path in cached:
        found.setdefault(name, path)
    return found


def libc_of(root: str, libraries: Mapping[str, str], stated_glibc: str | None) -> str | None:
    """``"glibc"``, ``"musl"`` or None (not known): glibc when the running C library says so
    (``stated_glibc``) or a ``libc.so.6`` is found; musl when its loader (``/lib/ld-musl-<arch>.so.1``)
    lies under ``root`` and no glibc does."""
    if stated_glibc or "libc.so.6" in libraries:
        return "glibc"
    if glob.glob(under(root, "/lib/ld-musl-*.so.1")) or glob.glob(under(root, "/usr/lib/ld-musl-*.so.1")):
        return "musl"
    return None


@lru_cache(maxsize=4096)  # a few hundred distinct names (GLIBC_2.2.5...), asked of every shared object of a build
def version_key(text: str) -> tuple[int, ...] | None:
    """``"2.34"`` -> (2, 34); None for text that is not dotted numbers (``PRIVATE``, ``TM_1``)."""
    return tuple(int(p) for p in text.split(".")) if _DOTTED.fullmatch(text) else None


def newest(names: Iterable[str], prefix: str) -> str | None:
    """The newest version among symbol version names of ``prefix`` (``GLIBCXX_``), as text.

    >>> newest(["GLIBCXX_3.4.9", "GLIBCXX_3.4.30", "CXXABI_1.3", "GLIBCXX_DEBUG"], "GLIBCXX_")
    '3.4.30'
    """
    best: tuple[tuple[int, ...], str] | None = None
    for name in names:
        if not name.startswith(prefix):
            continue
        text = name[len(prefix):]
        key = version_key(text)
        if key is not None and (best is None or key > best[0]):
            best = (key, text)
    return best[1] if best else None


def _definitions(root: str, path: str | None) -> tuple[str, ...]:
    if path is None:
        return ()
    try:
        return read(under(root, path)).version_definitions
    except ELFInvalid:
        return ()


def glibc_defined(root: str, libraries: Mapping[str, str]) -> str | None:
    """The newest ``GLIBC_`` version the ``libc.so.6`` found defines (``2.36``), or None."""
    return newest(_definitions(root, libraries.get("libc.so.6")), "GLIBC_")


def libstdcxx_versions(root: str, libraries: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(GLIBCXX, CXXABI)``: the newest of each the ``libstdc++.so.6`` found defines
    (``("3.4.30", "1.3.13")``), or None for each when there is none to read."""
    names = _definitions(root, libraries.get("libstdc++.so.6"))
    return newest(names, "GLIBCXX_"), newest(names, "CXXABI_")
