"""Where a host's shared libraries are, and what its C and C++ libraries define, read under a root.

See docs/install.md, "What a build needs".
"""

from __future__ import annotations

import glob
import os
import re
import struct
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import NamedTuple

from superfluid.runtime.hostfacts.elf import ELFFile, ELFInvalid
from superfluid.runtime.hostfacts.factfiles import Unread, absent, read_fact, under, why
from superfluid.runtime.kernel.jsonread import open_regular

__all__ = ["MULTIARCH", "MUSL_DEFAULT", "under", "parse_ldconfig", "parse_ld_cache", "ldconfig", "Search",
           "glibc_system_dirs", "musl_system_dirs", "system_dirs", "loader_search", "libraries_in", "libc_of",
           "glibc_defined", "libstdcxx_versions", "version_key", "newest"]

#: the Debian/Ubuntu multiarch folder name of each architecture
MULTIARCH = {"x64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
#: musl's name of each architecture (its loader ``/lib/ld-musl-<arch>.so.1``, its ``/etc/ld-musl-<arch>.path``)
_MUSL_ARCH = {"x64": "x86_64", "arm64": "aarch64"}
#: musl's search path when no ``/etc/ld-musl-<arch>.path`` names one (ldso/dynlink.c)
MUSL_DEFAULT = ("/lib", "/usr/local/lib", "/usr/lib")
#: glibc's loader cache (elf/cache.c): the new table's magic and version, its header (magic+version,
#: entries, bytes of strings, flags and padding, extension offset, 3 unused words) and one entry (flags,
#: name and path offsets, OS version, hwcap bits), in the host's byte order
_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_CACHE_HEADER = struct.Struct("=20sIIB3xI12x")
_CACHE_ENTRY = struct.Struct("=iIIIQ")
_CACHE_MAX_BYTES = 16 << 20
#: the flags of a cache entry the loader of each architecture takes (``_DL_CACHE_DEFAULT_ID``: libc6
#: and x86-64, or libc6 and AArch64 LP64): a 32-bit library in a multilib cache is not its
_CACHE_FLAGS = {"x64": 0x0303, "arm64": 0x0A03}
_PATH_FILE_MAX_BYTES = 64 << 10
_LINE = re.compile(r"^\s+(\S+)\s+\([^)]*\)\s*=>\s*(?P<path>/\S.*?)\s*$")
_SONAME = re.compile(r"\.so(\.|$)")
_DOTTED = re.compile(r"\d+(\.\d+)*")  # a version of dotted numbers (asked of every symbol version: compiled once)


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


def ldconfig(root: str, arch: str | None = None, unread: list[Unread] | None = None) -> list[tuple[str, str]]:
    """What ``ldconfig -p`` lists of the loader's cache under ``root`` (``<root>/etc/ld.so.cache``),
    read from the file itself (no ``ldconfig`` run: this is asked on every computed ``runtimes``),
    or nothing: no cache (musl has none), or not a cache of glibc's format. With ``arch``, only the
    entries the loader of that architecture takes. A cache that is refused (a FIFO, past 16 MiB) goes
    to ``unread``."""
    data = read_fact(root, "/etc/ld.so.cache", "library_dirs, libraries", unread, max_bytes=_CACHE_MAX_BYTES)
    return parse_ld_cache(data, arch) if data is not None else []


def parse_ld_cache(data: bytes, arch: str | None = None) -> list[tuple[str, str]]:
    """``(name, path)`` of each library in the bytes of a glibc ``ld.so.cache``, in its order: the
    ``glibc-ld.so.cache1.1`` table (after the old ``ld.so-1.7.0`` one, where a cache carries both),
    whose entries hold offsets of their name and path from the table's start; nothing when there is
    no such table, or an entry points past the end. With ``arch``, only the entries whose flags that
    architecture's loader takes (``_dl_cache_check_flags``)."""
    start = data.find(_CACHE_MAGIC)
    if start < 0 or len(data) < start + _CACHE_HEADER.size:
        return []
    _magic, count, _strings, _flags, _ext = _CACHE_HEADER.unpack_from(data, start)
    first = start + _CACHE_HEADER.size
    if count > (len(data) - first) // _CACHE_ENTRY.size:
        return []
    takes = _CACHE_FLAGS.get(arch or "")
    out = []
    for i in range(count):
        entry_flags, key, value, _os, _hwcap = _CACHE_ENTRY.unpack_from(data, first + i * _CACHE_ENTRY.size)
        if takes is not None and entry_flags != takes:
            continue
        name, path = _string(data, start + key), _string(data, start + value)
        if name and path and path.startswith("/"):
            out.append((name, path))
    return out


def _string(data: bytes, at: int) -> str | None:
    end = data.find(b"\0", at)
    return data[at:end].decode("utf-8", "replace") if 0 <= at < len(data) and end > at else None


class Search(NamedTuple):
    """Where the dynamic loader looks for a library, in its order: the folders ``LD_LIBRARY_PATH``
    names (``env``), the entries of its cache (``cached``: by name, never its folders listed: a library
    put in one after ``ldconfig`` ran is not found), then its built-in system folders (``system``).
    Paths are the host's (not under a test's root)."""

    env: tuple[str, ...] = ()
    cached: tuple[tuple[str, str], ...] = ()
    system: tuple[str, ...] = ()

    @property
    def dirs(self) -> tuple[str, ...]:
        """The folders, in the loader's order, each once: ``env``, those of the cache's entries, ``system``."""
        folders = (*self.env, *(os.path.dirname(path) for _, path in self.cached), *self.system)
        return tuple(dict.fromkeys(os.path.normpath(f) for f in folders))


def glibc_system_dirs(layout: str, arch: str) -> tuple[str, ...]:
    """glibc's built-in search path (what ``ld.so --help`` prints as its "system search path") where
    glibc is built as ``layout`` says: ``multiarch`` (Debian, Ubuntu: the multiarch folders of
    ``arch``, then ``/lib`` and ``/usr/lib``), ``lib64`` (Fedora, RHEL, SUSE: ``/lib64``,
    ``/usr/lib64``), ``usr-lib`` (Arch, Void: ``/usr/lib`` alone), else ``/lib`` and ``/usr/lib``.

    >>> glibc_system_dirs("multiarch", "x64")
    ('/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib', '/usr/lib')
    >>> glibc_system_dirs("lib64", "arm64")
    ('/lib64', '/usr/lib64')
    """
    triplet = MULTIARCH.get(arch)
    if layout == "multiarch" and triplet:
        return (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib")
    return {"lib64": ("/lib64", "/usr/lib64"), "usr-lib": ("/usr/lib",)}.get(layout, ("/lib", "/usr/lib"))


def _real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _glibc_layout(root: str, arch: str) -> str:
    """How the glibc under ``root`` is laid out (``glibc_system_dirs``), by its folders: a multiarch
    folder of ``arch``; else a ``/usr/lib64`` of its own (not a link to ``lib``, as Arch's is); else a
    ``/usr/lib`` that ``/lib`` links to (or none is there); else the classic one."""
    triplet = MULTIARCH.get(arch)
    if triplet and any(os.path.isdir(under(root, d)) for d in (f"/lib/{triplet}", f"/usr/lib/{triplet}")):
        return "multiarch"
    if _real_dir(under(root, "/usr/lib64")):
        return "lib64"
    if _real_dir(under(root, "/usr/lib")) and not _real_dir(under(root, "/lib")):
        return "usr-lib"
    return "lib"


def musl_system_dirs(text: str | None) -> tuple[str, ...]:
    """musl's search path: the folders its ``/etc/ld-musl-<arch>.path`` names (separated by newlines
    or colons), else (no such file: ``text`` None) its default.

    >>> musl_system_dirs(None), musl_system_dirs("/lib\\n/usr/lib:/opt/lib\\n")
    (('/lib', '/usr/local/lib', '/usr/lib'), ('/lib', '/usr/lib', '/opt/lib'))
    """
    if text is None:
        return MUSL_DEFAULT
    return tuple(p for p in re.split(r"[\n:]", text) if p.startswith("/"))


def _musl(root: str, arch: str) -> bool:
    """Whether the C library under ``root`` is musl: its loader is there and no glibc ``libc.so.6``
    lies in a folder glibc's loader searches."""
    name = f"ld-musl-{_MUSL_ARCH.get(arch, arch)}.so.1"
    if not any(os.path.lexists(under(root, f"{d}/{name}")) for d in ("/lib", "/usr/lib")):
        return False
    glibc = {d for layout in ("multiarch", "lib64", "lib") for d in glibc_system_dirs(layout, arch)}
    return not any(os.path.lexists(under(root, f"{d}/libc.so.6")) for d in glibc)


def system_dirs(root: str, arch: str, unread: list[Unread] | None = None) -> tuple[str, ...]:
    """The built-in search path of the loader under ``root``: musl's (its path file, read as a fact
    file: one refused goes to ``unread``, and the default is taken) or glibc's as its layout says."""
    if _musl(root, arch):
        path = f"/etc/ld-musl-{_MUSL_ARCH.get(arch, arch)}.path"
        data = read_fact(root, path, "library_dirs, libraries", unread, max_bytes=_PATH_FILE_MAX_BYTES)
        return musl_system_dirs(data.decode("utf-8", "replace") if data is not None else None)
    return glibc_system_dirs(_glibc_layout(root, arch), arch)


def _there(root: str, folders: Iterable[str]) -> tuple[str, ...]:
    """The absolute ``folders`` that are folders under ``root``, normalized, each once, in order."""
    out = (os.path.normpath(f) for f in folders if f.startswith("/"))
    return tuple(f for f in dict.fromkeys(out) if os.path.isdir(under(root, f)))


def loader_search(root: str, arch: str, ld_library_path: str | None,
                  unread: list[Unread] | None = None) -> Search:
    """Where the loader under ``root`` looks, in its order (``Search``): the absolute folders of
    ``ld_library_path`` that are there, the entries of its cache that it takes (glibc's; musl has
    none), then its built-in system folders that are there. Fact files it cannot read go to ``unread``."""
    system = system_dirs(root, arch, unread)
    cached = () if _musl(root, arch) else tuple(ldconfig(root, arch, unread))
    return Search(_there(root, (ld_library_path or "").split(os.pathsep)), cached, _there(root, system))


def _listed(found: dict[str, str], root: str, folders: Iterable[str]) -> None:
    """Add each library name (``*.so``, ``*.so.<N>``...) in ``folders`` not found yet, first folder first."""
    for folder in folders:
        try:
            names = os.listdir(under(root, folder))
        except OSError:
            continue
        prefix = folder.rstrip("/") + "/"
        for name in names:  # names are unique in a folder: its order does not matter (this is asked often)
            if ".so" in name and name not in found and _SONAME.search(name):
                found[name] = prefix + name


def libraries_in(root: str, search: Search) -> dict[str, str]:
    """Each library name the loader finds by ``search`` and the host path it would take it from:
    the first folder of ``LD_LIBRARY_PATH`` that has it, else the cache's entry, else the first
    system folder that has it. A folder of the cache is not listed: the loader takes only its entries."""
    found: dict[str, str] = {}
    _listed(found, root, search.env)
    for name, path in search.cached:
        found.setdefault(name, path)
    _listed(found, root, search.system)
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


def _definitions(root: str, path: str | None, fact: str, unread: list[Unread] | None) -> tuple[str, ...]:
    """The version definitions of the library at the host path ``path`` (a link followed); none when
    there is none, or it cannot be read: then ``unread`` gets it, for ``fact``, and why."""
    if path is None:
        return ()
    try:  # a regular file only: a FIFO or a link to /dev/zero is refused, never waited on or read
        with open_regular(under(root, path), follow=True) as f:
            return ELFFile(f).version_definitions
    except OSError as e:
        reason = None if absent(e) else why(e)
    except ELFInvalid as e:
        reason = str(e)  # "bad magic b'...': not an ELF object", "... lies outside the file ...: truncated?"
    if reason is not None and unread is not None:
        unread.append(Unread(path, fact, reason))
    return ()


def glibc_defined(root: str, libraries: Mapping[str, str], unread: list[Unread] | None = None) -> str | None:
    """The newest ``GLIBC_`` version the ``libc.so.6`` found defines (``2.36``), or None (one that
    cannot be read goes to ``unread``)."""
    return newest(_definitions(root, libraries.get("libc.so.6"), "glibc", unread), "GLIBC_")


def libstdcxx_versions(root: str, libraries: Mapping[str, str],
                       unread: list[Unread] | None = None) -> tuple[str | None, str | None]:
    """``(GLIBCXX, CXXABI)``: the newest of each the ``libstdc++.so.6`` found defines
    (``("3.4.30", "1.3.13")``), or None for each when there is none to read (one that cannot be read
    goes to ``unread``)."""
    names = _definitions(root, libraries.get("libstdc++.so.6"), "glibcxx, cxxabi", unread)
    return newest(names, "GLIBCXX_"), newest(names, "CXXABI_")
