"""What the download cache holds, by kind, and pruning what nothing needs.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from superfluid.installer.cache.blobs import is_sha256
from superfluid.installer.cache.holds import HOLDS, held_now, pruning
from superfluid.installer.cache.http_index import HttpEntry
from superfluid.installer.cache.records import BLOBS, HTTP, PARTIALS, read_record
from superfluid.installer.errors import StoreError

if TYPE_CHECKING:
    from superfluid.installer.mutex import MutexOwner

__all__ = ["KINDS", "Item", "Scan", "Pruned", "is_archive", "blob_kind", "is_stale", "parse_age", "human_age",
           "human_bytes", "guard_cache", "InUse", "scan", "prune"]

#: the kinds, in the order they are shown
KINDS = ("in_use", "unused", "http", "partial", "other")
_HEAD = 512  # bytes read of a blob to tell an archive (tar's magic is at 257)


# --- the rules (pure) ------------------------------------------------------------------------------------

def is_archive(head: bytes) -> bool:
    """Whether a file starting with ``head`` is an archive an install is made of: gzip, xz, bzip2,
    zstd or zip, or a tar (``ustar`` at byte 257)."""
    magics = (b"\x1f\x8b", b"\xfd7zXZ\x00", b"BZh", b"\x28\xb5\x2f\xfd", b"PK\x03\x04", b"PK\x05\x06")
    return head.startswith(magics) or head[257:262] == b"ustar"


def blob_kind(*, needed: bool, archive: bool) -> str:
    """A blob's kind: ``in_use`` when an install or a kept lock names it, else ``unused`` for an
    archive, else ``http`` (a body of the HTTP cache)."""
    return "in_use" if needed else ("unused" if archive else "http")


def is_stale(kind: str, *, age: float, grace: float, held: bool = False, named: bool = False,
             born_before: bool = True) -> bool:
    """Whether a prune removes an entry of ``kind``, ``age`` seconds since it was last written or
    used, with a grace period of ``grace`` seconds: never what a running process holds (``held``:
    its hold, or a partial's flock), nor anything written since the prune began (``born_before``
    false); an unused archive or a partial nobody writes once older than the grace; an HTTP body
    only when no record names it (``named``) any more; never what is in use, nor ``other``."""
    if held or not born_before or age < grace:
        return False
    if kind in ("unused", "partial"):
        return True
    return kind == "http" and not named


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """A grace period as ``--older-than`` takes it: a whole number and a unit, ``s`` ``m`` ``h``
    ``d`` or ``w`` (``30d``, ``12h``, ``0s``); answers seconds.

    Raises:
        ValueError: anything else (``30``, ``1.5d``, ``-1d``, ``30 days``).
    """
    digits, unit = text[:-1], text[-1:]
    if not digits.isdigit() or not digits.isascii() or unit not in _UNITS:
        raise ValueError(f"{text!r} is not an age (a whole number and a unit: s, m, h, d or w; e.g. 30d, 12h, 0s)")
    return float(int(digits) * _UNITS[unit])


def human_age(seconds: float) -> str:
    """An age for people: ``12 s``, ``5 min``, ``3 h``, ``2 days``."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value = int(seconds // size)
            return f"{value} {'day' if unit == 'days' and value == 1 else unit}"
    return f"{int(seconds)} s"


def human_bytes(n: int) -> str:
    """Bytes for people, as the installer says them: ``512 B``, ``12.3 kB``, ``1.2 MB``, ``3.4 GB``."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def guard_cache(root: str | os.PathLike[str]) -> None:
    """Refuse to prune a cache whose folder (or one of its own) is a symbolic link: nothing is
    deleted or written through a link inside the home.

    Raises:
        StoreError: names the link.
    """
    top = os.fspath(root)
    for path in (top, *(os.path.join(top, d) for d in (BLOBS, PARTIALS, HTTP, HOLDS))):
        if os.path.islink(path):
            raise StoreError(f"{path} is a symbolic link (to {os.readlink(path)}); superfluid writes nothing "
                             "through a link inside SUPERFLUID_HOME",
                             advice=f"remove the link {path} (or point SUPERFLUID_HOME at the directory it names)")


@dataclass(frozen=True, slots=True)
class InUse:
    """What the home's installs still need of the cache: the digests their receipts name, and how
    many installs read (``home.gc.in_use`` finds them; a prune is given them)."""

    digests: frozenset[str]
    installs: int


# --- reading the cache --------------------------------------------------------------------------------------

@dataclass(kw_only=True, frozen=True, slots=True)
class Item:
    """One file (a partial: its files) of the cache, its kind, and whether a prune removes it."""

    path: str  # below the cache, '/'-separated
    kind: str
    size: int
    age: float  # seconds since it was last written or used
    stale: bool = False
    also: tuple[str, ...] = ()  # a partial's other files (its record and its lock), counted and removed with it

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "kind": self.kind, "bytes": self.size, "age": round(self.age, 3)}


@dataclass(frozen=True, slots=True)
class Scan:
    """What ``scan`` found: every item, and how many installs and locks named what is in use."""

    root: str
    items: tuple[Item, ...]
    installs: int
    locks: tuple[str, ...] = ()

    def by_kind(self) -> dict[str, dict[str, int]]:
        out = {k: {"bytes": 0, "files": 0} for k in KINDS}
        for item in self.items:
            out[item.kind]["bytes"] += item.size
            out[item.kind]["files"] += 1 + len(item.also)
        return out

    def total(self) -> dict[str, int]:
        kinds = self.by_kind().values()
        return {"bytes": sum(k["bytes"] for k in kinds), "files": sum(k["files"] for k in kinds)}

    def stale(self) -> list[Item]:
        """What a prune removes, in the order it removes it: HTTP records before the blobs they
        name (a kill between leaves a blob no record names, which the next prune removes)."""
        return sorted((i for i in self.items if i.stale), key=lambda i: (not i.path.startswith("http/"), i.path))


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _head(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return b""
    try:
        return os.read(fd, _HEAD) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _records(root: str) -> dict[str, list[str]]:
    """The HTTP records of the cache by the blob each names: digest -> their paths below the cache."""

    out: dict[str, list[str]] = {}
    folder = os.path.join(root, HTTP)
    for name in _names(folder):
        entry = HttpEntry.from_json(read_record(Path(folder, name)))
        if entry is not None:
            out.setdefault(entry.sha256, []).append(f"http/{name}")
    return out


def _names(folder: str) -> list[str]:
    if os.path.islink(folder):
        return []
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


@dataclass
class _Facts:
    """What a scan compares against: the clock, the grace, and what is needed or held."""

    now: float
    began: float
    grace: float
    needed: Collection[str]
    held: Collection[str] = field(default_factory=set)

    def age(self, st: os.stat_result) -> float:
        return max(0.0, self.now - st.st_mtime)

    def before(self, st: os.stat_result) -> bool:
        return st.st_mtime < self.began


def _blobs(root: str, facts: _Facts, records: Mapping[str, list[str]]) -> list[Item]:
    out: list[Item] = []
    folder = os.path.join(root, BLOBS)
    for name in _names(folder):
        path = os.path.join(folder, name)
        st = _lstat(path)
        if st is None:
            continue
        if not is_sha256(name) or not stat.S_ISREG(st.st_mode):
            out.append(Item(path=f"sha256/{name}", kind="other", size=st.st_size, age=facts.age(st)))
            continue
        kind = blob_kind(needed=name in facts.needed, archive=is_archive(_head(path)))
        stale = is_stale(kind, age=facts.age(st), grace=facts.grace, held=name in facts.held,
                         named=kind == "http" and name in records, born_before=facts.before(st))
        out.append(Item(path=f"sha256/{name}", kind=kind, size=st.st_size, age=facts.age(st), stale=stale))
    return out


def _record_items(root: str, facts: _Facts, records: Mapping[str, list[str]], blobs: Mapping[str, Item]) -> list[Item]:
    """The HTTP records: each goes with the blob it names (or when that blob is gone already)."""
    out: list[Item] = []
    for digest, paths in records.items():
        blob = blobs.get(digest)
        for rel in paths:
            st = _lstat(os.path.join(root, rel))
            if st is None:
                continue
            gone = blob is None and facts.before(st) and facts.age(st) >= facts.grace
            out.append(Item(path=rel, kind="http", size=st.st_size, age=facts.age(st),
                            stale=gone or (blob is not None and blob.stale)))
    return out


def _partials(root: str, facts: _Facts) -> list[Item]:
    folder = os.path.join(root, PARTIALS)
    keys: dict[str, list[str]] = {}
    for name in _names(folder):
        key, dot, suffix = name.rpartition(".")
        keys.setdefault(key if dot and suffix in ("partial", "json", "lock") else name, []).append(name)
    out: list[Item] = []
    for key, names in sorted(keys.items()):
        stats = [(n, st) for n in names if (st := _lstat(os.path.join(folder, n))) is not None]
        if not stats:
            continue
        size = sum(st.st_size for _, st in stats)
        newest = max(stats, key=lambda t: t[1].st_mtime)[1]
        held = f"{key}.lock" in names and _partial_held(os.path.join(folder, f"{key}.lock"))
        first, *rest = sorted(n for n, _ in stats)
        out.append(Item(path=f"partial/{first}", kind="partial", size=size, age=facts.age(newest),
                        stale=is_stale("partial", age=facts.age(newest), grace=facts.grace, held=held,
                                 born_before=facts.before(newest)), also=tuple(f"partial/{n}" for n in rest)))
    return out


def _partial_held(lock: str) -> bool:
    """Whether a download holds the partial's flock now."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _others(root: str, facts: _Facts, seen: set[str]) -> list[Item]:
    out: list[Item] = []
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        if rel_top in (BLOBS, PARTIALS):
            dirs[:] = []
            continue
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            st = _lstat(os.path.join(top, name))
            if rel not in seen and st is not None:
                out.append(Item(path=rel, kind="http" if rel_top == "http" else "other", size=st.st_size,
                                age=facts.age(st)))
    return out


def scan(root: str | os.PathLike[str], in_use: InUse, *, grace: float = float("inf"),
         keep: Mapping[str, Collection[str]] | None = None, held: Collection[str] = (),
         began: float | None = None) -> Scan:
    """Every file of the cache at ``root`` with its kind, and (``grace``: seconds) whether a prune
    removes it. ``in_use``: what the home's installs still need (``home.gc.in_use``). ``keep``: lock
    file -> the digests it names, kept as in use. ``held``: the digests running processes hold.
    Reads; changes nothing."""
    top = os.fspath(root)
    now = time.time()
    needed, installs = set(in_use.digests), in_use.installs
    for digests in (keep or {}).values():
        needed |= set(digests)
    facts = _Facts(now, now if began is None else began, grace, needed, set(held))
    records = _records(top)
    blobs = _blobs(top, facts, records)
    items = blobs + _record_items(top, facts, records, {i.path.removeprefix("sha256/"): i for i in blobs})
    items += _partials(top, facts)
    seen = {p for i in items for p in (i.path, *i.also)}
    items += _others(top, facts, seen)
    return Scan(top, tuple(sorted(items, key=lambda i: i.path)), installs, tuple(keep or {}))


# --- pruning --------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune removed (or, ``dry_run``, would remove), and what the cache holds after."""

    scan: Scan
    removed: tuple[Item, ...]
    dry_run: bool
    grace: float

    @property
    def freed(self) -> int:
        return sum(i.size for i in self.removed)

    def left(self) -> dict[str, dict[str, int]]:
        """The cache by kind once the removed items are gone (a dry run: would be)."""
        out = self.scan.by_kind()
        for item in self.removed:
            out[item.kind]["bytes"] -= item.size
            out[item.kind]["files"] -= 1 + len(item.also)
        return out


def _remove(root: str, item: Item) -> None:
    """Delete one stale item; a partial while holding its flock (a download that started since the
    scan keeps it)."""
    if item.kind == "partial":
        _remove_partial(root, item)
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(root, item.path))


def _remove_partial(root: str, item: Item) -> None:
    names = [item.path, *item.also]
    lock = next((n for n in names if n.endswith(".lock")), None)
    fd = None
    if lock is not None:
        try:
            fd = os.open(os.path.join(root, lock), os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK |
                         getattr(os, "O_NOFOLLOW", 0))
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # type: ignore[arg-type]
            return  # a download took it since the scan: it stays
        except OSError:
            fd = None
    try:
        for rel in sorted(names, key=lambda n: n.endswith(".lock")):  # the lock last, still held
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(root, rel))
    finally:
        if fd is not None:
            os.close(fd)


def prune(root: str | os.PathLike[str], in_use: InUse, *, grace: float, dry_run: bool = False,
          keep: Mapping[str, Collection[str]] | None = None, timeout: float = 600.0,
          on_wait: Callable[[MutexOwner], None] | None = None) -> Pruned:
    """Remove what is stale in the cache at ``root`` (see the module doc), holding the cache's
    prune lock (``holds.pruning``) so that no running process loses what it holds; with
    ``dry_run`` only say what would go (no lock, nothing changed).

    Raises:
        MutexBusy: another prune held the lock past ``timeout`` seconds.
        MutexError: the lock file cannot be opened.
        OSError: a file cannot be removed.
    """

    top = os.fspath(root)
    began = time.time()
    if dry_run or not os.path.isdir(top):
        found = scan(top, in_use, grace=grace, keep=keep, held=held_now(top), began=began)
        return Pruned(found, tuple(found.stale()) if dry_run else (), dry_run, grace)
    with pruning(top, timeout=timeout, on_wait=on_wait) as held:
        found = scan(top, in_use, grace=grace, keep=keep, held=held, began=began)
        for item in found.stale():
            _remove(top, item)
    return Pruned(found, tuple(found.stale()), False, grace)
