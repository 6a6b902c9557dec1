"""The member rule: where an archive member may land, or why not; member by member, or over a finished tree.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, NamedTuple

from superfluid.runtime.kernel.errors import BadFile

__all__ = [
    "UnsafeArchive",
    "ExtractLimits",
    "Member",
    "Entry",
    "MemberVerdict",
    "Opener",
    "Defence",
    "Members",
    "judge_member",
    "name_parts",
    "check_tree",
]

_ADVICE = "nothing was installed from it; report the archive to its publisher, or use another release"
_KINDS = ("file", "dir", "symlink", "hardlink", "chardev", "blockdev", "fifo", "other")
_MAX_HOPS = 40  # symlinks followed in one resolution, as Linux's ELOOP bound


class UnsafeArchive(BadFile):
    """An archive holds a member we refuse to write; nothing of it is kept."""

    def __init__(self, archive: str, fault: str, *, member: str | None = None) -> None:
        super().__init__(archive, f"its member {member!r} {fault}" if member is not None else fault, advice=_ADVICE)
        self.archive = archive
        self.member = member


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractLimits:
    """Caps of one archive's extraction; a bomb is refused before its bytes are written."""

    max_members: int = 100_000  # members of any kind
    max_bytes: int = 16 << 30  # bytes of regular-file content, uncompressed
    max_ratio: int = 200  # uncompressed bytes per archive byte, once past ratio_floor
    ratio_floor: int = 256 << 20  # bytes always allowed, whatever the ratio
    max_name: int = 4096  # bytes of one member name
    max_depth: int = 128  # directories a member name nests (real bundles nest fewer than 20)

    def allowance(self, archive_size: int) -> int:
        """Bytes of content an archive of ``archive_size`` bytes may unpack to."""
        return min(self.max_bytes, max(self.ratio_floor, self.max_ratio * archive_size))


_DEFAULT_LIMITS = ExtractLimits()


@dataclass(frozen=True, slots=True)
class Member:
    """One archive member as the rule sees it (whatever the archive format)."""

    name: str  # as written in the archive
    kind: str  # one of _KINDS
    size: int = 0  # bytes of content (regular files)
    mode: int = 0o644  # permission bits as archived, setuid and friends included
    linkname: str = ""  # a symlink's target, or the member a hard link names


class Entry(NamedTuple):
    """What already exists at a normalized path of the destination: "file", "dir" or "symlink"."""

    kind: str
    target: str = ""  # a symlink's target


class MemberVerdict(NamedTuple):
    """Where a member lands (``path`` relative, ``""`` for the root itself) with which permission
    bits, or why it is refused (``fault`` set, then ``path`` is None)."""

    path: str | None
    mode: int = 0
    fault: str | None = None

    @property
    def ok(self) -> bool:
        return self.fault is None


#: how to open a regular member's content
Opener = Callable[[], IO[bytes]]
#: a reader's own last check of a member, run once the rule has passed it
Defence = Callable[[], None]
#: an archive's members in order, as a reader yields them: each with its opener and its defence, if any
Members = Generator[tuple[Member, Opener | None, Defence | None], None, None]


class _Escape(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def name_parts(name: str) -> list[str] | None:
    """Path components of an archive name, ``.`` and empty ones dropped; None if absolute or ``..``."""
    if name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return None if ".." in parts else parts


def _resolve(parts: Sequence[str], tree: Mapping[str, Entry]) -> list[str]:
    """Resolve a relative path inside the destination, following the symlinks of ``tree`` as the
    kernel would (``..`` after a link climbs from where the link points, not from the link).

    Raises:
        _Escape: the path climbs above the destination, a link is absolute, or links loop.
    """
    out: list[str] = []
    pending = list(reversed(parts))
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                raise _Escape("outside")
            out.pop()
            continue
        out.append(part)
        entry = tree.get("/".join(out))
        if entry is None or entry.kind != "symlink":
            continue
        hops += 1
        if hops > _MAX_HOPS:
            raise _Escape("loop")
        out.pop()
        if entry.target.startswith("/"):
            raise _Escape("outside")
        pending.extend(reversed(entry.target.split("/")))
    return out


def _mode(member: Member) -> int:
    # Never setuid/setgid/sticky, never writable by group or others; the owner can always read and
    # write (and enter directories), so a later rmtree cannot fail on our own install.
    bits = member.mode & 0o755
    return bits | (0o700 if member.kind == "dir" else 0o600)


def judge_member(member: Member, tree: Mapping[str, Entry], limits: ExtractLimits | None = None) -> MemberVerdict:
    """The one containment-and-member-type rule: where ``member`` may land, given what
    the destination already holds (``tree``: normalized relative path → ``Entry``), or why not.

    Rules, in order: only files, directories and links (no devices, FIFOs or others); a name that
    is relative, free of ``..``, neither too long nor too deep (``limits``); no parent that is a
    symlink or a file (nothing is written through a link); no second member at one path
    (directories may repeat); a symlink whose target, resolved through the links of ``tree``, stays
    inside; a hard link only to a regular file that came earlier. Pure: no I/O; the fault is the
    words after "its member 'x' ".
    """
    if member.kind not in ("file", "dir", "symlink", "hardlink"):
        what = {"chardev": "a character device", "blockdev": "a block device", "fifo": "a FIFO"}
        return MemberVerdict(None, fault=f"is {what.get(member.kind, 'a special file')}; "
                                         "only files, directories and links are installed")
    limits = limits or _DEFAULT_LIMITS
    if len(member.name.encode("utf-8", "surrogateescape")) > limits.max_name:
        return MemberVerdict(None, fault=f"has a name longer than {limits.max_name} bytes")
    parts = name_parts(member.name)
    if parts is None:
        why = "is absolute" if member.name.startswith("/") else "climbs with '..'"
        return MemberVerdict(None, fault=f"would land outside the install (its name {why})")
    if len(parts) > limits.max_depth:
        return MemberVerdict(None, fault=f"nests deeper than {limits.max_depth} directories")
    if not parts:
        if member.kind == "dir":
            return MemberVerdict("", _mode(member))
        return MemberVerdict(None, fault="has an empty name")
    for i in range(1, len(parts)):
        parent = tree.get("/".join(parts[:i]))
        if parent is not None and parent.kind == "symlink":
            return MemberVerdict(None, fault=f"goes through the symlink {'/'.join(parts[:i])!r} "
                                             "(nothing is written through a link)")
        if parent is not None and parent.kind != "dir":
            return MemberVerdict(None, fault=f"lies inside {'/'.join(parts[:i])!r}, which is a file")
    path = "/".join(parts)
    existing = tree.get(path)
    if existing is not None and not (existing.kind == "dir" and member.kind == "dir"):
        return MemberVerdict(None, fault=f"appears twice (a second member would replace the {existing.kind} "
                                         "already written there)")
    if member.kind == "symlink":
        fault = _link_fault(parts, member.linkname, tree)
        if fault:
            return MemberVerdict(None, fault=fault)
    if member.kind == "hardlink":
        target = name_parts(member.linkname)
        if target is None or not target:
            return MemberVerdict(None, fault=f"is a hard link to {member.linkname!r}, outside the install")
        entry = tree.get("/".join(target))
        if entry is None or entry.kind != "file":
            return MemberVerdict(None, fault=f"is a hard link to {member.linkname!r}, "
                                             "which is not a regular file earlier in the archive")
    return MemberVerdict(path, _mode(member))


def _link_fault(parts: Sequence[str], target: str, tree: Mapping[str, Entry]) -> str | None:
    if not target:
        return "is a symlink with an empty target"
    if target.startswith("/"):
        return f"links to {target!r}, outside the install (an absolute target)"
    try:
        _resolve([*parts[:-1], *target.split("/")], tree)
    except _Escape as e:
        if e.why == "loop":
            return f"links to {target!r}, which loops through other links"
        return f"links to {target!r}, outside the install"
    return None


def check_tree(root: str | os.PathLike[str], label: str) -> None:
    """Walk ``root`` (links not followed) and apply ``judge_member`` to everything it holds, each
    symlink resolved against the whole final tree; ``label`` names the archive in errors.

    Raises:
        UnsafeArchive: a special file, a setuid/setgid bit, or a link leaving ``root``.
    """
    root_s = os.fspath(root)
    tree: dict[str, Entry] = {}
    for rel, st, target in _walk(root_s):
        kind = ("dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode)
                else "symlink" if stat.S_ISLNK(st.st_mode) else _special(st.st_mode))
        if kind not in ("dir", "file", "symlink"):
            fault = judge_member(Member(rel, kind), tree).fault
            raise UnsafeArchive(label, fault or "is a special file", member=rel)
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            raise UnsafeArchive(label, "is setuid or setgid", member=rel)
        tree[rel] = Entry(kind, target)
    for rel, entry in tree.items():
        if entry.kind == "symlink":
            verdict = judge_member(Member(rel, "symlink", linkname=entry.target), _Without(tree, rel))
            if verdict.fault:
                raise UnsafeArchive(label, verdict.fault, member=rel)


def _special(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "chardev"
    if stat.S_ISBLK(mode):
        return "blockdev"
    return "fifo" if stat.S_ISFIFO(mode) else "other"


def _walk(root: str) -> Iterator[tuple[str, os.stat_result, str]]:
    """Every entry under ``root`` (relative path, lstat, link target), depth first, without
    recursion: an archive may nest deeper than Python's stack."""
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            target = os.readlink(entry.path) if stat.S_ISLNK(st.st_mode) else ""
            yield path, st, target
            if stat.S_ISDIR(st.st_mode):
                pending.append(path)


class _Without(Mapping[str, Entry]):
    """``tree`` without one key: a link is judged against every entry but itself."""

    def __init__(self, tree: Mapping[str, Entry], key: str) -> None:
        self._tree, self._key = tree, key

    def __getitem__(self, key: str) -> Entry:
        if key == self._key:
            raise KeyError(key)
        return self._tree[key]

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._tree if k != self._key)

    def __len__(self) -> int:
        return len(self._tree) - (self._key in self._tree)
