"""Builders of real archives (tar.gz, zip) and a disk snapshot, for the extraction and store tests."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

__all__ = ["E", "make_tar", "make_zip", "snapshot"]


class E(NamedTuple):
    """One archive entry: kind (file, dir, symlink, hardlink, chr, blk, fifo), name, data or target, mode."""

    kind: str
    name: str
    data: bytes | str = b""
    mode: int | None = None


_TYPES = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
          "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE, "fifo": tarfile.FIFOTYPE}


def make_tar(path: Path, entries: Iterable[E], *, mode: str = "w:gz") -> Path:
    """Write ``entries`` in order, exactly as given (tarfile builds hostile members without complaint)."""
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            ti = tarfile.TarInfo(e.name)
            ti.type = _TYPES[e.kind]
            ti.mtime = 1_700_000_000
            ti.mode = e.mode if e.mode is not None else (0o755 if e.kind == "dir" else 0o644)
            data = e.data.encode() if isinstance(e.data, str) else e.data
            if e.kind in ("symlink", "hardlink"):
                ti.linkname = data.decode()
                tar.addfile(ti)
            elif e.kind == "file":
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
            else:
                if e.kind in ("chr", "blk"):
                    ti.devmajor, ti.devminor = 1, 3
                tar.addfile(ti)
    return path


def make_zip(path: Path, entries: Iterable[E]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for e in entries:
            data = e.data.encode() if isinstance(e.data, str) else e.data
            zi = zipfile.ZipInfo(e.name + ("/" if e.kind == "dir" and not e.name.endswith("/") else ""))
            fmt = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "symlink": stat.S_IFLNK, "chr": stat.S_IFCHR,
                   "fifo": stat.S_IFIFO}[e.kind]
            zi.external_attr = (fmt | (e.mode if e.mode is not None else 0o644)) << 16
            if e.kind == "dir":
                zi.external_attr |= 0x10
            zf.writestr(zi, data)
    return path


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ``root`` with its kind, size, permission bits and link target (links not followed)."""
    found: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(p, "rb") as f:
                    head = f.read(64)
                found[rel] = ("file", st.st_size, stat.S_IMODE(st.st_mode), head)
    return found
