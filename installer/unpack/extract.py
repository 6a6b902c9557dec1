"""Extract a release archive into a fresh staging directory: its reader picked, its members written.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import lzma
import os
import secrets
import tarfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO

from superfluid.installer.files import remove_tree
from superfluid.installer.unpack.inflate import ERRORS
from superfluid.installer.unpack.kind import describe
from superfluid.installer.unpack.rules import Entry, ExtractLimits, UnsafeArchive, check_tree
from superfluid.installer.unpack.tar import tar_members
from superfluid.installer.unpack.writer import ExtractFailed, merge_tree, write_members
from superfluid.installer.unpack.zip import is_zip, zip_members
from superfluid.runtime.kernel.errors import BadFile

__all__ = ["extract_archive", "extract_all"]

#: what reading a broken archive raises (truncated, corrupt compression, not an archive)
_BROKEN: tuple[type[Exception], ...] = (tarfile.TarError, zipfile.BadZipFile, *ERRORS, lzma.LZMAError, EOFError)


@contextmanager
def _reading(archive: str) -> Iterator[None]:
    """Turn a broken archive (truncated, corrupt compression, not an archive) into BadFile."""

    try:
        yield
    except _BROKEN as e:
        what = describe(archive)
        if what is not None:  # no archive format at all: named for what it is (issue 42, item 23)
            raise BadFile(archive, f"is not a release archive: it is {what}",
                          advice="nothing was installed from it; name a release archive of the runtime (.tar.gz, "
                                 ".tar.xz or .zip)") from e
        raise BadFile(archive, f"is not a readable archive ({e or type(e).__name__}): it is cut short or "
                               "damaged", advice="nothing was installed from it; fetch it again from where it "
                                                 "came from") from e


def _unpack(archive: str, dest: str, limits: ExtractLimits, stream: IO[bytes] | None = None,
            size: int | None = None) -> dict[str, Entry]:
    allowance = limits.allowance(size if size is not None else os.path.getsize(archive))
    if stream is not None:
        members = tar_members(archive, dest, stream)
    else:
        members = zip_members(archive) if is_zip(archive) else tar_members(archive, dest)
    with _reading(archive), closing(members):  # closed at once on a refusal: its reading thread stops
        return write_members(archive, dest, members, limits, allowance)


def _descend(archive: str, dest: str, tree: Mapping[str, Entry]) -> str:
    """The root to keep: through single top-level directories (dot entries ignored)."""
    prefix = ""
    while True:
        top = {p[len(prefix):].split("/", 1)[0] for p in tree if p.startswith(prefix)} - {""}
        top = {t for t in top if not t.startswith(".")}
        if len(top) != 1:
            return os.path.join(dest, prefix) if prefix else dest
        (only,) = top
        entry = tree[prefix + only]
        if entry.kind == "symlink":
            raise UnsafeArchive(archive, "its only top-level entry is a symlink "
                                         f"({prefix + only!r} -> {entry.target!r})")
        if entry.kind != "dir":
            return os.path.join(dest, prefix) if prefix else dest
        prefix += only + "/"


def extract_archive(archive: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                    limits: ExtractLimits | None = None, descend: bool = True,
                    stream: IO[bytes] | None = None, size: int | None = None) -> Path:
    """Extract ``archive`` into ``dest``, a new directory (its parent must exist), and return the
    root of the content: ``dest`` itself, or with ``descend`` the directory reached through single
    top-level directories (``pkg-1.0/`` of ``pkg-1.0.tar.gz``).

    With ``stream``, the archive is a tar read from it front to back as its bytes arrive, already
    decompressed (``superfluid.installer.unpack.stream`` decompresses as the download flows), and
    ``archive`` only names it in errors; ``size`` is then the archive's size as downloaded, which
    the bomb allowance is reckoned from. Every member is judged exactly as from a file.

    On any error ``dest`` is removed: nothing is left behind and nothing was written outside it.

    Raises:
        UnsafeArchive: a member is refused by ``judge_member`` or the caps (names the member).
        BadFile: the archive is corrupt, truncated or not an archive.
        ExtractFailed: the disk refused a write (space, permissions).
        ValueError: a ``stream`` without its ``size``.
    """
    archive_s, dest_s = os.fspath(archive), os.path.abspath(os.fspath(dest))
    limits = limits or ExtractLimits()
    if stream is not None and size is None:
        raise ValueError("a streamed archive needs its size")
    try:
        os.mkdir(dest_s, 0o755)
    except OSError as e:
        raise ExtractFailed(archive_s, dest_s, e.strerror or str(e)) from e
    try:
        tree = _unpack(archive_s, dest_s, limits, stream, size)
        root = _descend(archive_s, dest_s, tree) if descend else dest_s
        check_tree(root, archive_s)
    except BaseException:
        remove_tree(dest_s)
        raise
    return Path(root)


def extract_all(archives: Sequence[str | os.PathLike[str]], lib: str | os.PathLike[str], *,
                limits: ExtractLimits | None = None, descend: bool = True) -> None:
    """Extract each archive (in order) beside ``lib`` and merge it into ``lib`` (created if
    missing), the first archive winning a name; then check the merged tree once more.

    Raises:
        UnsafeArchive: an archive is refused, or two merge into a link that leaves ``lib``.
        BadFile: an archive is corrupt.
        ExtractFailed: the disk refused a write.
    """
    lib_s = os.path.abspath(os.fspath(lib))
    os.makedirs(lib_s, exist_ok=True)
    parent = os.path.dirname(lib_s)
    for archive in archives:
        tmp = os.path.join(parent, f".extract-{secrets.token_hex(8)}")
        try:
            root = extract_archive(archive, tmp, limits=limits, descend=descend)
            merge_tree(root, lib_s)
        except OSError as e:
            raise ExtractFailed(os.fspath(archive), lib_s, e.strerror or str(e)) from e
        finally:
            remove_tree(tmp)
    names = ", ".join(os.path.basename(os.fspath(a)) for a in archives)
    check_tree(lib_s, f"{lib_s} (merged from {names})")
