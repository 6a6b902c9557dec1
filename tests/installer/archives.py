"""Builders of real archives (tar.gz, zip), a disk snapshot, a refused extraction: for extraction and store tests."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import pytest

from superfluid.installer.unpack.extract import extract_archive
from superfluid.installer.unpack.rules import ExtractLimits, UnsafeArchive

__all__ = ["E", "HOSTILE", "make_tar", "make_zip", "snapshot", "refused"]


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


def refused(area: Path, archive: Path, fragment: str, *, limits: ExtractLimits | None = None,
            error: type[Exception] = UnsafeArchive) -> Exception:
    """Extract ``archive`` into ``area/stage/x``, assert ``error`` with ``fragment`` of its message, and
    that nothing under ``area`` changed: nothing was written outside the destination, which is gone."""
    before = snapshot(area)
    with pytest.raises(error, match=fragment) as info:
        extract_archive(archive, area / "stage" / "x", limits=limits)
    assert snapshot(area) == before, "something was written outside the destination, or it was left behind"
    return info.value


#: hostile tar archives, each refused by the one member rule with a fragment of its message, whether
#: extracted from a file (test_rules) or as it downloads (test_stream); ``{area}`` is the test's
#: directory, which holds ``outside/victim``
HOSTILE = [
    pytest.param([E("file", "ok"), E("file", "../escaped", "x")], "climbs with '..'", id="dotdot-traversal"),
    pytest.param([E("file", "a/../../../escaped", "x")], "climbs with '..'", id="dotdot-nested"),
    pytest.param([E("file", "{area}/outside/abs", "x")], "is absolute", id="absolute-path"),
    pytest.param([E("symlink", "l", "{area}/outside")], "absolute target", id="symlink-absolute-outside"),
    pytest.param([E("symlink", "l", "../../outside")], "outside the install", id="symlink-relative-outside"),
    pytest.param([E("symlink", "l", "../../outside"), E("file", "l/victim", "pwned")], "outside the install",
                 id="symlink-outside-then-file-through-it"),
    pytest.param([E("dir", "sub"), E("symlink", "l", "sub"), E("file", "l/x", "x")], "goes through the symlink",
                 id="symlink-to-dir-then-file-through-it"),
    pytest.param([E("dir", "a"), E("dir", "a/b"), E("symlink", "a/b/q", "../.."), E("symlink", "p", "a/b/q/..")],
                 "links to 'a/b/q/..', outside", id="symlink-chain-via-earlier-link"),
    pytest.param([E("symlink", "p", "a/b/q/../outside"), E("dir", "a"), E("dir", "a/b"),
                  E("symlink", "a/b/q", "../..")],
                 "outside the install", id="symlink-chain-via-later-link"),
    pytest.param([E("hardlink", "h", "/etc/passwd")], "hard link to '/etc/passwd', outside", id="hardlink-etc-passwd"),
    pytest.param([E("hardlink", "h", "../../outside/victim")], "outside the install", id="hardlink-outside"),
    pytest.param([E("hardlink", "h", "{area}/outside/victim")], "outside the install", id="hardlink-absolute"),
    pytest.param([E("hardlink", "h", "nothere")], "not a regular file earlier", id="hardlink-dangling"),
    pytest.param([E("chr", "null")], "character device", id="char-device"),
    pytest.param([E("blk", "sda")], "block device", id="block-device"),
    pytest.param([E("fifo", "pipe")], "FIFO", id="fifo"),
    pytest.param([E("symlink", "lib.so", "real.so"), E("file", "real.so", "x"), E("file", "lib.so", "pwned")],
                 "appears twice", id="duplicate-overwrites-symlink"),
    pytest.param([E("file", "lib.so", "x"), E("symlink", "lib.so", "../../outside/victim")],
                 "appears twice", id="duplicate-symlink-over-file"),
    pytest.param([E("dir", "d"), E("symlink", "d", "../../outside")], "appears twice",
                 id="duplicate-symlink-over-dir"),
    pytest.param([E("symlink", "top", ".")], "only top-level entry is a symlink", id="lone-top-level-symlink"),
    pytest.param([E("file", "pkg/a", "x"), E("file", ".hidden", "x"), E("symlink", "pkg/l", "../.hidden")],
                 "outside the install", id="link-escapes-after-descending"),
]
