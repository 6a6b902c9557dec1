"""Safe extraction of release archives into a fresh staging directory.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import hashlib
import lzma
import os
import secrets
import shutil
import stat
import struct
import tarfile
import threading
import zipfile
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple, cast

from superfluid.installer.files import remove_tree
from superfluid.installer.unpack.inflate import ERRORS, Inflow, crc32, raw_inflater
from superfluid.runtime.hostfacts import elf
from superfluid.runtime.hostfacts.needs import is_shared_object
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.record import remember

__all__ = [
    "UnsafeArchive",
    "ExtractFailed",
    "ExtractLimits",
    "Member",
    "Entry",
    "MemberVerdict",
    "judge_member",
    "extract_archive",
    "extract_all",
    "merge_tree",
    "check_tree",
]

_FIX = "nothing was installed from it; report the archive to its publisher, or use another release"
_KINDS = ("file", "dir", "symlink", "hardlink", "chardev", "blockdev", "fifo", "other")
_MAX_HOPS = 40  # symlinks followed in one resolution, as Linux's ELOOP bound
_CHUNK = 1 << 20  # bytes copied per read
#: what reading a broken archive raises (truncated, corrupt compression, not an archive)
_BROKEN: tuple[type[Exception], ...] = (tarfile.TarError, zipfile.BadZipFile, *ERRORS, lzma.LZMAError, EOFError)
_ZIP_HEADER = struct.Struct("<4s22xHH")  # a zip member's local header: signature, ..., name and extra lengths


class UnsafeArchive(BadFile):
    """An archive holds a member we refuse to write; nothing of it is kept."""

    def __init__(self, archive: str, fault: str, *, member: str | None = None) -> None:
        super().__init__(archive, f"its member {member!r} {fault}" if member is not None else fault, fix=_FIX)
        self.archive = archive
        self.member = member


class ExtractFailed(SuperfluidError):
    """Writing into the destination failed for a reason of this machine (disk full, permissions)."""

    def __init__(self, archive: str, dest: str, reason: str) -> None:
        super().__init__(f"could not extract {archive} into {dest}: {reason}",
                         fix="free space or fix the permissions of SUPERFLUID_HOME, then run the same command again")
        self.archive = archive
        self.dest = dest
        self.reason = reason


@dataclass(frozen=True, slots=True)
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


class _Escape(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def _split(name: str) -> list[str] | None:
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
    parts = _split(member.name)
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
        target = _split(member.linkname)
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


# --- readers: archive -> (Member, open-content) ---------------------------------------------------

_Opener = Callable[[], IO[bytes]]
_Defence = Callable[[], None]
#: an archive's members in order, each with how to open its content and a last check, if any
_Members = Generator[tuple[Member, _Opener | None, _Defence | None], None, None]


def _tar_kind(ti: tarfile.TarInfo) -> str:
    if ti.isreg():
        return "file"
    for kind, test in (("dir", ti.isdir), ("symlink", ti.issym), ("hardlink", ti.islnk),
                       ("chardev", ti.ischr), ("blockdev", ti.isblk), ("fifo", ti.isfifo)):
        if test():
            return kind
    return "other"


def _is_zip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")


@contextmanager
def _reading(archive: str) -> Iterator[None]:
    """Turn a broken archive (truncated, corrupt compression, not an archive) into BadFile."""

    try:
        yield
    except _BROKEN as e:
        raise BadFile(archive, f"is not a readable archive ({e or type(e).__name__})",
                      fix="its download is corrupt or it is not a release archive; run the same command again") from e


def _tar_defence(archive: str, dest: str, ti: tarfile.TarInfo) -> _Defence | None:
    """Python's own ``data`` filter, run after our rule has passed a member (defence in depth)."""
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        return None

    def defend() -> None:
        try:
            data_filter(ti, dest)
        except tarfile.FilterError as e:
            raise UnsafeArchive(archive, f"is refused by Python's tarfile data filter ({e})",
                                member=ti.name) from e

    return defend


class _Forward:
    """A tar arriving as a stream, as tarfile's reader of files sees it: ``read``, and
    ``seek``/``tell`` that only ever move forward (by skipping); ``take`` hands a member's bytes
    over in the pieces they arrived in. tarfile's own stream mode ("r|") copies every byte through
    two buffers and ``extractfile`` through two more; a member written from ``take`` is not copied."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._chunk = b""
        self._at = 0  # in _chunk
        self._pos = 0  # in the archive

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0 or pos < self._pos:
            raise tarfile.ReadError("it goes back to an earlier member, which a stream cannot")
        while self._pos < pos and self._next(pos - self._pos):
            self._skip(min(pos - self._pos, len(self._chunk) - self._at))
        return self._pos

    def _next(self, want: int) -> bool:
        """Whether bytes are available (reading the next chunk when the last is used up)."""
        if self._at < len(self._chunk):
            return True
        self._chunk, self._at = self._stream.read(max(want, _CHUNK)), 0
        return bool(self._chunk)

    def _skip(self, n: int) -> None:
        self._at += n
        self._pos += n

    def read(self, n: int = -1) -> bytes:
        parts = []
        while (n < 0 or n > 0) and self._next(n):
            take = len(self._chunk) - self._at if n < 0 else min(n, len(self._chunk) - self._at)
            whole = self._at == 0 and take == len(self._chunk)
            parts.append(self._chunk if whole else self._chunk[self._at:self._at + take])
            self._skip(take)
            n -= take if n > 0 else 0
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def take(self, limit: int) -> memoryview:
        """The next at most ``limit`` bytes as they arrived, without a copy (empty at the end)."""
        if limit <= 0 or not self._next(limit):
            return memoryview(b"")
        take = min(limit, len(self._chunk) - self._at)
        piece = memoryview(self._chunk)[self._at:self._at + take]
        self._skip(take)
        return piece


class _Content:
    """A regular member's bytes, in the pieces they arrived in from a ``_Forward`` (what
    ``extractfile`` answers, without its copies)."""

    def __init__(self, source: _Forward, offset: int, size: int) -> None:
        self._source, self._offset, self._left = source, offset, size

    def pieces(self) -> Iterator[memoryview]:
        if self._source.tell() != self._offset:
            self._source.seek(self._offset)
        while self._left and (piece := self._source.take(self._left)):
            self._left -= len(piece)
            yield piece

    def __enter__(self) -> _Content:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _tar_members(archive: str, dest: str, stream: IO[bytes] | None = None) -> _Members:
    # One pass, front to back, whatever the compression; members come in archive order.
    # ``stream``: the tar's bytes as they arrive, already decompressed (``archive`` only names it);
    # without it, the file is decompressed on a second thread as it is read (``_inflowing``). Either
    # is read through a ``_Forward``, which only ever moves forward as tarfile's stream mode does.
    with _inflowing(archive) if stream is None else nullcontext(stream) as source:
        forward = _Forward(source)
        with tarfile.open(fileobj=cast("IO[bytes]", forward), mode="r:") as tar:
            for ti in tar:
                member = Member(ti.name, _tar_kind(ti), ti.size, ti.mode, ti.linkname)
                opener = _tar_opener(tar, forward, ti) if member.kind == "file" else None
                yield member, opener, _tar_defence(archive, dest, ti)


@contextmanager
def _inflowing(archive: str) -> Iterator[IO[bytes]]:
    """The tar in the file ``archive``, decompressed (gzip, bzip2, xz or none, by its first bytes)
    by a second thread as it reads the file, while this one reads the tar: the two cores of a
    streamed install (``stream``), for an archive already on disk (a cached or resumed download,
    a restore, ``--from``)."""
    f = open(archive, "rb")  # closed below, once the thread is done with it
    inflow = Inflow()

    def produce() -> None:
        try:
            while chunk := f.read(_CHUNK):
                if not inflow.feed(chunk):
                    return
            inflow.finish()
        except BaseException as e:  # the file could not be read: the reader's error, in its turn
            inflow.fail(e)

    thread = threading.Thread(target=produce, name="superfluid-inflate", daemon=True)
    thread.start()
    try:
        yield cast("IO[bytes]", inflow)
    finally:
        inflow.cancel()
        thread.join()
        f.close()


def _tar_opener(tar: tarfile.TarFile, forward: _Forward, ti: tarfile.TarInfo) -> _Opener:
    if not ti.issparse():
        return lambda: cast("IO[bytes]", _Content(forward, ti.offset_data, ti.size))
    return lambda: cast("IO[bytes]", tar.extractfile(ti))


class _ZipContent:
    """A zip member's bytes, its deflate data inflated by ``inflate``'s inflater (ISA-L where it is
    installed; zipfile's reader would use the standard library's), as ``zipfile`` reads them: the
    member opened by zipfile first (its checks of the local header: the name agrees with the
    directory's, no encryption or patch data), at most the declared size given, the CRC-32 checked
    once the data ends or the declared size is reached."""

    def __init__(self, zf: zipfile.ZipFile, zi: zipfile.ZipInfo, archive: str) -> None:
        self._zf, self._zi, self._archive = zf, zi, archive

    def pieces(self) -> Iterator[memoryview]:
        zi = self._zi
        with self._zf.open(zi):  # zipfile's checks of the local header, and its refusals
            pass
        left, crc = zi.file_size, 0
        if left:
            for piece in self._data():
                piece = piece[:left]  # a member longer than it declares: zipfile gives its declared size
                left -= len(piece)
                crc = crc32(piece, crc)
                if not left:  # the last piece is given only once the CRC-32 is right, as zipfile does
                    self._check(crc)
                    yield memoryview(piece)
                    return
                yield memoryview(piece)
        self._check(crc)

    def _check(self, crc: int) -> None:
        if crc != self._zi.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {self._zi.filename!r}")

    def _data(self) -> Iterator[bytes]:
        """The member's bytes as they come out of the inflater, at most ``_CHUNK`` at a time."""
        zi = self._zi
        with open(self._archive, "rb") as f:
            f.seek(zi.header_offset)
            header = f.read(_ZIP_HEADER.size)
            if len(header) != _ZIP_HEADER.size:
                raise zipfile.BadZipFile("Truncated file header")
            magic, name_length, extra_length = _ZIP_HEADER.unpack(header)
            if magic != b"PK\x03\x04":
                raise zipfile.BadZipFile("Bad magic number for file header")
            f.seek(name_length + extra_length, os.SEEK_CUR)
            inflater = raw_inflater() if zi.compress_type == zipfile.ZIP_DEFLATED else None
            left = zi.compress_size
            while left > 0 and (chunk := f.read(min(left, _CHUNK))):
                left -= len(chunk)
                if inflater is None:
                    yield chunk
                    continue
                while chunk and not inflater.eof:
                    out = inflater.decompress(chunk, _CHUNK)
                    chunk = inflater.unconsumed_tail
                    if out:
                        yield out
            if left > 0:
                raise EOFError("the archive ends inside a member's data")
            while inflater is not None and not inflater.eof and (out := inflater.decompress(b"", _CHUNK)):
                yield out  # what the inflater still held when its input ran out (zipfile's flush)

    def __enter__(self) -> _ZipContent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _zip_opener(zf: zipfile.ZipFile, zi: zipfile.ZipInfo, archive: str) -> _Opener:
    if zi.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) and not zi.flag_bits & 0x1:
        return lambda: cast("IO[bytes]", _ZipContent(zf, zi, archive))
    return lambda: zf.open(zi)  # bzip2, lzma, encrypted: zipfile's own reader (and its refusals)


def _zip_members(archive: str) -> _Members:

    with zipfile.ZipFile(archive) as zf:
        for zi in zf.infolist():
            unix = zi.external_attr >> 16
            fmt = stat.S_IFMT(unix)
            if zi.is_dir():
                kind = "dir"
            elif fmt == stat.S_IFLNK:
                kind = "symlink"
            elif fmt in (0, stat.S_IFREG):
                kind = "file"
            else:
                kind = {stat.S_IFCHR: "chardev", stat.S_IFBLK: "blockdev", stat.S_IFIFO: "fifo"}.get(fmt, "other")
            linkname = ""
            if kind == "symlink":
                with zf.open(zi) as f:
                    linkname = f.read(4097).decode("utf-8", "surrogateescape")
            mode = (unix & 0o7777) or (0o755 if kind == "dir" else 0o644)
            member = Member(zi.filename, kind, zi.file_size, mode, linkname)
            yield member, (_zip_opener(zf, zi, archive) if kind == "file" else None), None


# --- the writer -------------------------------------------------------------------------------------

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


def _write(root: str, path: str, member: Member, verdict_mode: int, opener: _Opener | None,
           archive: str) -> None:
    full = os.path.join(root, path)
    if member.kind == "dir":
        os.mkdir(full, 0o700)  # final bits at the end, so a read-only directory can still be filled
    elif member.kind == "symlink":
        os.symlink(member.linkname, full)
    elif member.kind == "hardlink":
        first = os.path.join(root, *_split(member.linkname) or [])
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


def _unpack(archive: str, dest: str, limits: ExtractLimits, stream: IO[bytes] | None = None,
            size: int | None = None) -> dict[str, Entry]:
    tree: dict[str, Entry] = {}
    dir_modes: dict[str, int] = {}
    allowance = limits.allowance(size if size is not None else os.path.getsize(archive))
    count = total = 0
    if stream is not None:
        members = _tar_members(archive, dest, stream)
    else:
        members = _zip_members(archive) if _is_zip(archive) else _tar_members(archive, dest)
    with _reading(archive), closing(members):  # closed at once on a refusal: its reading thread stops
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

