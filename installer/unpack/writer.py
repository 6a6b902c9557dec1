"""The writer: an archive's members, each judged by the member rule, put on disk in a fresh destination.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from typing import IO

from superfluid.installer.unpack.rules import (
    Entry,
    ExtractLimits,
    Member,
    Members,
    Opener,
    UnsafeArchive,
    judge_member,
    name_parts,
)
from superfluid.runtime.hostfacts import elf
from superfluid.runtime.hostfacts.needs import is_shared_object
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.record import remember

__all__ = ["ExtractFailed", "write_members", "merge_tree"]

_CHUNK = 1 << 20  # bytes copied per read


class ExtractFailed(SuperfluidError):
    """Writing into the destination failed for a reason of this machine (disk full, permissions)."""

    def __init__(self, archive: str, dest: str, reason: str) -> None:
        super().__init__(f"could not extract {archive} into {dest}: {reason}",
                         advice="free space or fix the permissions of SUPERFLUID_HOME, then run the same command "
                         "again")
        self.archive = archive
        self.dest = dest
        self.reason = reason


def write_members(archive: str, dest: str, members: Members, limits: ExtractLimits,
                  allowance: int) -> dict[str, Entry]:
    """Judge each of ``members`` in turn and write it under ``dest`` (an empty directory), with at
    most ``limits.max_members`` members and ``allowance`` bytes of content; directories get their
    permission bits last. Answers what was written (normalized relative path -> ``Entry``).

    Raises:
        UnsafeArchive: a member is refused by ``judge_member``, its reader's defence or the caps.
        BadFile: a member holds fewer bytes than it declares.
        ExtractFailed: the disk refused a write (space, permissions).
    """
    tree: dict[str, Entry] = {}
    dir_modes: dict[str, int] = {}
    count = total = 0
    for member, opener, defence in members:
        count += 1
        if count > limits.max_members:
            raise UnsafeArchive(archive, f"has more than {limits.max_members} members "
                                         "(a decompression bomb?)")
        verdict = judge_member(member, tree, limits)
        if verdict.path is None:
            raise UnsafeArchive(archive, verdict.fault or "is refused", member=member.name)
        if defence is not None:
            defence()
        if verdict.path == "":
            continue
        if member.kind == "file":
            total += member.size
            if total > allowance:
                raise UnsafeArchive(archive, f"would unpack to more than {allowance} bytes "
                                             "(a decompression bomb?)")
        _ensure_parents(dest, verdict.path, tree, dir_modes)
        if member.kind == "dir":
            dir_modes[verdict.path] = verdict.mode
            if verdict.path in tree:
                continue
        try:
            _write(dest, verdict.path, member, verdict.mode, opener, archive)
        except OSError as e:
            raise ExtractFailed(archive, dest, f"{member.name}: {e.strerror or e}") from e
        kind = {"hardlink": "file"}.get(member.kind, member.kind)
        tree[verdict.path] = Entry(kind, member.linkname if kind == "symlink" else "")
    for path in sorted(dir_modes, reverse=True):
        os.chmod(os.path.join(dest, path), dir_modes[path])
    return tree


def _copy(src: IO[bytes], fd: int, size: int, archive: str, name: str) -> str:
    """Write the member's bytes to ``fd``; answers their SHA-256 (the receipt records it, so that
    recording the staged install does not read every file again: ``record.remember``)."""
    written = 0
    h = hashlib.sha256()
    for piece in _pieces(src):
        written += len(piece)
        if written > size:  # a zip entry longer than its declared size: a bomb's trick
            raise UnsafeArchive(archive, f"holds more than the {size} bytes it declares", member=name)
        _write_all(fd, piece)
        h.update(piece)
    if written != size:
        raise BadFile(archive, f"its member {name!r} holds {written} bytes, not the {size} it declares")
    return h.hexdigest()


def _pieces(src: IO[bytes]) -> Iterator[memoryview]:
    """The bytes of ``src``, each piece written before the next is asked for: a streamed member's
    own pieces (no copy), else read into one reused buffer."""
    own = getattr(src, "pieces", None)
    if own is not None:
        yield from own()
        return
    view = memoryview(bytearray(_CHUNK))
    while n := src.readinto(view):  # type: ignore[attr-defined]
        yield view[:n]


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def _write(root: str, path: str, member: Member, verdict_mode: int, opener: Opener | None,
           archive: str) -> None:
    full = os.path.join(root, path)
    if member.kind == "dir":
        os.mkdir(full, 0o700)  # final bits at the end, so a read-only directory can still be filled
    elif member.kind == "symlink":
        os.symlink(member.linkname, full)
    elif member.kind == "hardlink":
        first = os.path.join(root, *name_parts(member.linkname) or [])
        try:
            os.link(first, full, follow_symlinks=False)
        except OSError:  # a filesystem without hard links: a copy is as good
            shutil.copyfile(first, full, follow_symlinks=False)
            os.chmod(full, stat.S_IMODE(os.lstat(first).st_mode))
    elif opener is not None:
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with opener() as src:
                digest = _copy(src, fd, member.size, archive, member.name)
            os.fchmod(fd, verdict_mode)
            remember(os.fstat(fd), digest)
        finally:
            os.close(fd)
        if is_shared_object(os.path.basename(path)):  # its needs are read here, beside the inflating,
            elf.remember(full)  # not after the extraction, before the probe (needs.measure)


def _ensure_parents(root: str, path: str, tree: dict[str, Entry], dir_modes: dict[str, int]) -> None:
    parts = path.split("/")
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        if prefix not in tree:  # judge_member has ruled out links and files here
            os.mkdir(os.path.join(root, prefix), 0o700)
            tree[prefix] = Entry("dir")
            dir_modes[prefix] = 0o755


def merge_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Move the entries of ``src`` into ``dst`` by rename (both on one filesystem): names that
    exist in ``dst`` win (the first archive wins), directories merge recursively, nothing is merged
    into or through a symlink. What is not moved stays in ``src`` for the caller to remove.

    Raises:
        OSError: a rename failed.
    """
    pending = [(os.fspath(src), os.fspath(dst))]
    while pending:
        src_s, dst_s = pending.pop()
        with os.scandir(src_s) as it:
            entries = list(it)
        for entry in entries:
            target = os.path.join(dst_s, entry.name)
            if not os.path.lexists(target):
                os.rename(entry.path, target)
            elif entry.is_dir(follow_symlinks=False) and os.path.isdir(target) and not os.path.islink(target):
                pending.append((entry.path, target))
