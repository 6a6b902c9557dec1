"""A real libllama whose build looks made for a newer distribution: one version need raised in place.

``raise_need(lib_dir, into)`` copies the libllama/libggml files of ``lib_dir`` (a build of
``tests/native/build_libllama.py``, symlink chains kept) into ``into`` and renames, in libllama's
dynamic string table, the version it needs from glibc (``GLIBC_2.34``) to one of the same length no
glibc defines (``GLIBC_2.99``), recomputing the ``vna_hash`` of every ``.gnu.version_r`` entry that
names it. To the dynamic loader the copy is exactly a build made on a newer distribution: it refuses
it ("version `GLIBC_2.99' not found"), as ``superfluid.runtime.hostfacts.needs`` says it will before loading it.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

from superfluid.runtime.hostfacts.elf import elf_hash, read

__all__ = ["raise_need", "copy_build"]


def copy_build(lib_dir: Path, into: Path) -> Path:
    """The libllama/libggml files of ``lib_dir`` copied into ``into`` (links as links); ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    for path in sorted(lib_dir.iterdir()):
        if not path.name.startswith(("libllama", "libggml")):
            continue
        if path.is_symlink():
            os.symlink(os.readlink(path), into / path.name)
        else:
            shutil.copy2(path, into / path.name)
    return into


def raise_need(lib_dir: Path, into: Path, *, old: str = "GLIBC_2.34", new: str = "GLIBC_2.99",
               library: str = "libllama.so") -> Path:
    """Copy the build (``copy_build``) and raise ``library``'s need of ``old`` to ``new`` (the same
    length) in place; the path of the file changed."""
    if len(old) != len(new):
        raise ValueError(f"{old!r} and {new!r} differ in length: the string table cannot be rewritten in place")
    copy_build(lib_dir, into)
    target = (into / library).resolve()
    obj = read(target)
    entries = [n for n in obj.version_needs if n.name == old]
    if not entries:
        raise ValueError(f"{target.name} needs no {old} (it needs {sorted({n.name for n in obj.version_needs})})")
    data = bytearray(target.read_bytes())
    order = "<" if obj.encoding == "little" else ">"
    for entry in entries:
        start = entry.name_offset
        assert bytes(data[start:start + len(old) + 1]) == old.encode() + b"\0"
        data[start:start + len(new)] = new.encode()
        data[entry.offset:entry.offset + 4] = struct.pack(order + "I", elf_hash(new.encode()))  # vna_hash
    target.write_bytes(bytes(data))
    return target
