"""What an install holds, file by file, as pip's ``RECORD`` says it of a wheel.

See docs/install.md, "Verifying an install later".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.fixes import Fix, render, repair
from superfluid.runtime.kernel.home_cache import Written
from superfluid.runtime.kernel.jsonread import kind_of
from superfluid.runtime.kernel.layout import install_receipt
from superfluid.runtime.kernel.receipt import MAX_BYTES, RECEIPT, Receipt, write_receipt

__all__ = ["FILES", "UNRECORDED", "STAT_FACTS", "FileRecord", "Difference", "Verification", "NotRecordable",
           "record_tree", "compare", "files_of", "with_files", "verify_install", "glance", "remember"]

#: the receipt's key that holds the list
FILES = "files"
_CHUNK = 1 << 20

Change = Literal["missing", "changed", "added"]
#: a regular file's stat facts a receipt records beside its size (as git's index does): what a glance
#: compares to see a file rewritten in place at its old size, without reading a byte of it
STAT_FACTS = ("mtime_ns", "ctime_ns", "inode")
_STAT_WORDS = {"mtime_ns": "modification time", "ctime_ns": "change time", "inode": "inode"}


class NotRecordable(SuperfluidError):
    """A staged install whose files cannot be recorded in its receipt (unreadable, special, too many)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class FileRecord:
    """One entry below an install: a regular file (``size``, ``sha256``, ``executable``), a symbolic
    link (``link``: its target), or, only when found, something else (``other``: what it is, or why
    it could not be read)."""

    path: str  # below the install, '/'-separated
    size: int | None = None
    sha256: str | None = None
    executable: bool = False
    link: str | None = None
    other: str | None = None
    #: a regular file's stat facts when it was recorded (``STAT_FACTS``; None: not recorded)
    mtime_ns: int | None = field(default=None, compare=False)
    ctime_ns: int | None = field(default=None, compare=False)
    inode: int | None = field(default=None, compare=False)

    @property
    def kind(self) -> str:
        return "link" if self.link is not None else ("file" if self.sha256 is not None else "other")

    def describe(self) -> str:
        """What it is, in words: ``a file of 12 bytes``, ``a link to libx.so.1``, ``a FIFO``."""
        if self.kind == "link":
            return f"a link to {self.link}"
        if self.kind == "file":
            return f"a{'n executable' if self.executable else ''} file of {self.size} bytes"
        return self.other or "not a file or a link"

    def to_json(self) -> dict[str, Any]:
        if self.link is not None:
            return {"path": self.path, "link": self.link}
        out: dict[str, Any] = {"path": self.path, "size": self.size, "sha256": self.sha256}
        if self.executable:
            out["executable"] = True
        out.update((k, v) for k in STAT_FACTS if (v := getattr(self, k)) is not None)
        return out

    def stat_change(self, now: FileRecord) -> str | None:
        """How the stat facts of ``now`` (the same path, found) differ from those recorded here, in
        words, or None: not when they hold, nor when none were recorded (an older receipt)."""
        moved = [_STAT_WORDS[k] for k in STAT_FACTS
                 if getattr(self, k) is not None and getattr(self, k) != getattr(now, k)]
        if not moved:
            return None
        said = ", ".join(moved[:-1]) + (" and " if len(moved) > 1 else "") + moved[-1]
        return f"rewritten since it was installed: its {said} {'differ' if len(moved) > 1 else 'differs'} " \
               "from the receipt's, at the same size"

    @classmethod
    def from_json(cls, data: Any, where: str, index: int) -> FileRecord:
        """One entry of a receipt's ``files``.

        Raises:
            BadFile: it is not a file's or a link's entry (names ``where`` and its JSON path).
        """
        at = f"$.{FILES}[{index}]"
        if not isinstance(data, Mapping) or not isinstance(data.get("path"), str) or not data["path"]:
            raise BadFile(where, "is not a recorded file (an object with a path)", json_path=at)
        if isinstance(data.get("link"), str):
            return cls(path=data["path"], link=data["link"])
        size, sha256 = data.get("size"), data.get("sha256")
        if not _is_count(size) or not _is_hex64(sha256):
            raise BadFile(where, "records neither a link nor a file's size and SHA-256", json_path=at)
        for k in STAT_FACTS:
            if data.get(k) is not None and not _is_count(data[k]):
                raise BadFile(where, f"records a {k} that is not a whole number", json_path=f"{at}.{k}")
        return cls(path=data["path"], size=size, sha256=sha256, executable=data.get("executable") is True,
                   mtime_ns=data.get("mtime_ns"), ctime_ns=data.get("ctime_ns"), inode=data.get("inode"))


@dataclass(frozen=True, slots=True)
class Difference:
    """How one path differs from what the receipt records."""

    path: str
    change: Change
    detail: str
    #: it is gone, or of another kind than recorded (a directory, a FIFO, unreadable): the install is
    #: broken, not only changed
    breaks: bool = field(default=False, compare=False)

    def describe(self) -> str:
        return f"{self.change} {self.path} ({self.detail})"

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "detail": self.detail}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


# --- the rule (pure) -----------------------------------------------------------------------------------

def _changed(want: FileRecord, got: FileRecord) -> str | None:
    """How ``got`` differs from ``want`` (the same path), or None when it does not."""
    if want.kind != got.kind:
        return f"it is {got.describe()}; the receipt records {want.describe()}"
    if want.kind == "link":
        return None if want.link == got.link else f"it links to {got.link}; the receipt records {want.link}"
    if got.kind == "other":
        return got.describe()
    if want.size != got.size:
        return f"{got.size} bytes; the receipt records {want.size}"
    if want.sha256 != got.sha256:
        return f"its SHA-256 is {got.sha256}; the receipt records {want.sha256}"
    if want.executable != got.executable:
        return "it is executable; the receipt records it not" if got.executable else \
            "it is no longer executable; the receipt records it executable"
    return None


def compare(recorded: Iterable[FileRecord], found: Iterable[FileRecord]) -> tuple[Difference, ...]:
    """What differs between an install's recorded files and the files found in it, by path: a
    recorded path that is gone is ``missing``; one whose kind, target, size, SHA-256 or executable
    bit differs is ``changed``; a path found that the receipt does not record is ``added``
    (whatever it is). Empty when the install is what its receipt records."""
    want = {r.path: r for r in recorded}
    got = {f.path: f for f in found}
    out: list[Difference] = []
    for path in sorted(want.keys() | got.keys()):
        if path not in got:
            out.append(Difference(path, "missing", "the receipt records " + want[path].describe(), breaks=True))
        elif path not in want:
            out.append(Difference(path, "added", got[path].describe()))
        elif (why := _changed(want[path], got[path])) is not None:
            out.append(Difference(path, "changed", why, breaks=want[path].kind != got[path].kind
                                  or got[path].kind == "other"))
    return tuple(out)


# --- reading a tree ------------------------------------------------------------------------------------

def _text(rel: bytes) -> str:
    """A path as the receipt records it: UTF-8, or (a name that is not) with its bytes escaped."""
    try:
        return rel.decode("utf-8")
    except UnicodeDecodeError:
        return rel.decode("utf-8", "backslashreplace")


def _name(path: str) -> bytes:
    """The bytes of the name a recorded ``path`` stands for (``_text`` undone: its ``\\xNN`` escapes
    are the bytes of a name that is not UTF-8; a UTF-8 name that spells them is kept as it is)."""
    raw = path.encode("utf-8")
    if b"\\x" not in raw:
        return raw
    undone = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m[1], 16)]), raw)
    return undone if undone != raw and _text(undone) == path else raw


#: SHA-256 of the files this process wrote, hashed as they were written (the extractor's writer): a file
#: unchanged since is not read again to be recorded (``home_cache.Written``)
_WRITTEN: Written[str] = Written()


def remember(st: os.stat_result, sha256: str) -> None:
    """Record that the regular file whose ``fstat`` (taken after its last write) is ``st`` holds
    bytes of SHA-256 ``sha256``: ``record_tree`` uses it while the file's size and modification
    time are unchanged (a rename or a chmod keeps both), and reads the file otherwise."""
    _WRITTEN.keep(st, sha256)


def _hash(path: bytes) -> tuple[int, str, bool]:
    """Size, SHA-256 and executable bit of the regular file at ``path``, never opened through a link
    or into a FIFO that took its place.

    Raises:
        OSError: it cannot be read, or is not (any more) a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{os.fsdecode(path)} is no longer a regular file")
        h, size = hashlib.sha256(), 0
        while block := os.read(fd, _CHUNK):
            h.update(block)
            size += len(block)
        return size, h.hexdigest(), bool(st.st_mode & 0o111)
    finally:
        os.close(fd)


def _entry(full: bytes, rel: bytes, *, digest: str | None = None) -> tuple[FileRecord, bool]:
    """The record of one entry, and whether it is a directory to descend into; ``digest``: taken as a
    regular file's SHA-256 instead of reading it (a glance)."""
    path = _text(rel)
    try:
        st = os.lstat(full)
    except OSError as e:
        return FileRecord(path=path, other=f"cannot be read ({e.strerror or e})"), False
    if stat.S_ISDIR(st.st_mode):
        return FileRecord(path=path), True
    if stat.S_ISLNK(st.st_mode):
        try:
            return FileRecord(path=path, link=_text(os.readlink(full))), False
        except OSError as e:
            return FileRecord(path=path, other=f"a link that cannot be read ({e.strerror or e})"), False
    if not stat.S_ISREG(st.st_mode):
        return FileRecord(path=path, other=kind_of(st.st_mode)), False
    known = digest if digest is not None else _WRITTEN.get(st)  # else hashed as it was written, unchanged since
    if known is not None:  # not read again
        return FileRecord(path=path, size=st.st_size, sha256=known, executable=bool(st.st_mode & 0o111),
                          mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns, inode=st.st_ino), False
    try:
        size, sha256, executable = _hash(full)
    except OSError as e:
        return FileRecord(path=path, other=f"a file that cannot be read ({e.strerror or e})"), False
    return FileRecord(path=path, size=size, sha256=sha256, executable=executable, mtime_ns=st.st_mtime_ns,
                      ctime_ns=st.st_ctime_ns, inode=st.st_ino), False


def record_tree(root: str | os.PathLike[str], *, skip: Sequence[str] = ()) -> tuple[FileRecord, ...]:
    """Every regular file and symbolic link below ``root`` (``skip``: relative paths left out, such
    as the receipt), sorted by path; anything else found (a FIFO, a device, something unreadable, a
    directory that cannot be listed) is there as ``other``. Directories are not recorded: their
    files are. Links are never followed."""
    top = os.fsencode(root)
    skipped = {os.fsencode(s) for s in skip}
    out: list[FileRecord] = []
    pending = [b""]
    while pending:
        rel_dir = pending.pop()
        try:
            names = sorted(os.listdir(os.path.join(top, rel_dir) if rel_dir else top))
        except OSError as e:
            if rel_dir:
                out.append(FileRecord(path=_text(rel_dir),
                                      other=f"a directory that cannot be listed ({e.strerror or e})"))
                continue
            raise
        for name in names:
            rel = os.path.join(rel_dir, name) if rel_dir else name
            if rel in skipped:
                continue
            record, descend = _entry(os.path.join(top, rel), rel)
            if descend:
                pending.append(rel)
            else:
                out.append(record)
    return tuple(sorted(out, key=lambda r: r.path))


# --- the receipt's list ----------------------------------------------------------------------------------

def files_of(receipt: Receipt, where: str = "runtime.json") -> tuple[FileRecord, ...] | None:
    """The files ``receipt`` records, or None when it records none (an install made before
    receipts recorded files, or by another installer).

    Raises:
        BadFile: ``files`` is there but is not a list of recorded files.
    """
    raw = receipt.extra.get(FILES)
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise BadFile(where, "records its files as something other than a list", json_path=f"$.{FILES}")
    return tuple(FileRecord.from_json(item, where, i) for i, item in enumerate(raw))


def with_files(receipt: Receipt, install_dir: str | os.PathLike[str], *, max_bytes: int | None = None) -> Receipt:
    """``receipt`` recording every file of ``install_dir`` (its own ``runtime.json`` excepted).

    Raises:
        NotRecordable: something in it is neither a readable file, a directory nor a link, or the
            receipt would be larger than a reader reads (``max_bytes``, default the receipt's cap).
    """
    records = record_tree(install_dir, skip=(RECEIPT,))
    odd = [r for r in records if r.kind == "other"]
    if odd:
        raise NotRecordable(f"{install_dir}: {odd[0].path} is {odd[0].describe()}; an install holds files, "
                            "directories and links only")
    done = replace(receipt, extra={**receipt.extra, FILES: [r.to_json() for r in records]})
    cap = MAX_BYTES if max_bytes is None else max_bytes
    if len(json.dumps(done.to_json(), indent=2)) + 1 > cap:
        raise NotRecordable(f"{install_dir} holds {len(records)} files, more than its receipt can record "
                            f"within {cap} bytes")
    return done


# --- one install -----------------------------------------------------------------------------------------

@dataclass(kw_only=True, frozen=True, slots=True)
class Verification:
    """What ``verify_install`` found: the differences from the receipt, or why nothing could be
    compared (``problem``: the receipt does not read, or records no files)."""

    id: str
    install: str
    path: str
    recorded: int | None = None  # how many entries the receipt records (None: none, see problem)
    differences: tuple[Difference, ...] = ()
    problem: str | None = None
    #: what was found, file by file (their stat facts too): what ``verify_install(record=True)`` records
    found: tuple[FileRecord, ...] = field(default=(), compare=False, repr=False)
    #: the stat facts found were written in the receipt (``verify_install(record=True)``)
    restamped: bool = field(default=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.differences

    @property
    def fix(self) -> Fix:
        return repair(self.id, self.install)

    def of(self, change: Change) -> list[Difference]:
        return [d for d in self.differences if d.change == change]

    def summary(self, *, named: bool = True, fixed: bool = True) -> str:
        """One line: verified, or what is wrong and (``fixed``) the command that puts it back
        (``named``: led by the runtime's id, else by the install's name alone)."""
        who = f"{self.id} {self.install}" if named else self.install
        fix = f": {render([self.fix])}" if fixed else ""
        if self.problem is not None:
            return f"{who}: {self.problem}{fix}"
        if not self.differences:
            return f"{who}: verified ({self.recorded} files as its receipt records them)"
        counts = ", ".join(f"{len(self.of(c))} {c}" for c in ("missing", "changed", "added") if self.of(c))
        return f"{who} does not match its receipt ({counts}){fix}"

    def to_json(self) -> dict[str, Any]:
        return {"install": self.install, "path": self.path, "ok": self.ok, "recorded": self.recorded,
                "problem": self.problem, **{c: [d.to_json() for d in self.of(c)] for c in ("missing", "changed",
                                                                                      "added")},
                "fix": None if self.ok else self.fix.command}


#: why an install's files cannot be compared when its receipt records none
UNRECORDED = "no file list recorded (it was installed before superfluid recorded the files of an install)"


def verify_install(runtime_id: str, install: str, path: str | os.PathLike[str],
                   receipt: Receipt | None, problem: str | None = None, *, record: bool = False) -> Verification:
    """Compare the install at ``path`` with what its ``receipt`` records (None: it does not read,
    and ``problem`` says why). Reads every file; changes nothing, but with ``record``: when every file
    hashes as recorded and their stat facts moved (a copied home), the receipt records them as they are
    now (as git's index does), so a glance calls the install ready again (``restamped``; skipped where
    the home is not writable)."""
    where = os.fspath(path)
    if receipt is None:
        return Verification(id=runtime_id, install=install, path=where,
                            problem=f"its receipt does not read ({problem})")
    try:
        recorded = files_of(receipt, install_receipt(where))
    except BadFile as e:
        return Verification(id=runtime_id, install=install, path=where, problem=f"its receipt does not read ({e})")
    if recorded is None:
        return Verification(id=runtime_id, install=install, path=where, problem=UNRECORDED)
    try:
        found = record_tree(Path(where), skip=(RECEIPT,))
    except OSError as e:
        return Verification(id=runtime_id, install=install, path=where, recorded=len(recorded),
                       problem=f"it cannot be read ({e.strerror or e})")
    verified = Verification(id=runtime_id, install=install, path=where, recorded=len(recorded),
                            differences=compare(recorded, found), found=found)
    return replace(verified, restamped=True) if record and _record_stat_facts(receipt, verified, where) else verified


def _restamped(receipt: Receipt, verified: Verification) -> Receipt | None:
    """``receipt`` recording the stat facts ``verified`` found, when every file hashed as recorded
    and the facts of one differ from those recorded (or none were: an older receipt), as git's index
    records a file it hashed again; None when there is nothing to record. A copied home is then
    changed to a glance once, until ``runtime verify`` has hashed it, not for ever."""
    if not verified.ok:
        return None
    recorded = {r.path: r for r in files_of(receipt) or ()}
    if all(r.kind != "file" or (r.inode is not None and r.stat_change(f) is None)
           for f in verified.found if (r := recorded.get(f.path)) is not None):
        return None
    return replace(receipt, extra={**receipt.extra, FILES: [f.to_json() for f in verified.found]})


def _record_stat_facts(receipt: Receipt, verified: Verification, path: str | os.PathLike[str]) -> bool:
    """Write ``_restamped(receipt, verified)`` in the install at ``path``. False when there was
    nothing to record, or the home is not writable (the glance keeps calling it changed)."""
    again = _restamped(receipt, verified)
    if again is None:
        return False
    try:
        write_receipt(install_receipt(path), again)
    except OSError:
        return False
    return True


def glance(receipt: Receipt, path: str | os.PathLike[str]) -> tuple[Difference, ...]:
    """What a look at the paths ``receipt`` records finds different below ``path``, without reading a
    byte of a file: a recorded path missing, or of another kind, size, link target or executable bit,
    or a file whose stat facts (``STAT_FACTS``: modification and change time, inode) are not those
    recorded, rewritten in place at its size (``runtime verify`` hashes; this is the check a command
    can afford on every run). Empty when the receipt records no files (nothing to look at) or they look
    as recorded.

    Raises:
        BadFile: ``files`` is there but is not a list of recorded files.
    """
    where = os.fspath(path)
    recorded = files_of(receipt, install_receipt(where)) or ()
    top = os.fsencode(where)
    found: list[FileRecord] = []
    for want in recorded:
        rel = _name(want.path)
        full = os.path.join(top, rel)
        if not os.path.lexists(full):
            continue  # missing: compare says so
        record, is_dir = _entry(full, rel, digest=want.sha256 or "")  # the digest is taken as recorded
        found.append(FileRecord(path=record.path, other=kind_of(stat.S_IFDIR)) if is_dir else record)
    differences = compare(recorded, found)
    seen = {d.path for d in differences}
    now = {f.path: f for f in found}
    rewritten = [Difference(want.path, "changed", why) for want in recorded
                 if want.path not in seen and want.kind == "file" and want.path in now
                 and (why := want.stat_change(now[want.path])) is not None]
    return tuple(sorted((*differences, *rewritten), key=lambda d: d.path))
