"""The install mutex: one process at a time changes a runtime (a ``flock`` of ``runtimes/<id>/.install.lock``);
the cache's prune lock and serve's sessions folder are held the same way."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from superfluid.installer.files import NotALockFile, open_lock_file
from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.kernel.jsonread import loads
from superfluid.runtime.kernel.layout import LOCK

__all__ = ["MutexOwner", "MutexBusy", "MutexError", "install_mutex", "mutex_owner"]


class MutexError(SuperfluidError):
    """The lock file cannot be opened (permissions of the home)."""

    ERROR_CODE = "lock"  # the code of its --json error since before it was named for the mutex


@dataclass(frozen=True, slots=True)
class MutexOwner:
    """Who holds (or last held) a lock, as recorded in the lock file."""

    pid: int | None
    command: str
    started: str  # UTC, "2025-01-31T12:00:00Z"; "" when unknown

    def describe(self) -> str:
        who = f"pid {self.pid}" if self.pid else "another process"
        what = f" ({self.command})" if self.command else ""
        since = f", since {self.started}" if self.started else ""
        return f"{who}{what}{since}"

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "command": self.command, "started": self.started}


class MutexBusy(SuperfluidError):
    """Another process holds the runtime's install lock and did not let go within the timeout."""

    ERROR_CODE = "lock-busy"  # the code of its --json error since before it was named for the mutex

    def __init__(self, lock: str, holder: MutexOwner, waited: float) -> None:
        super().__init__(
            f"{lock} is held by {holder.describe()}; waited {waited:g} s",
            advice="let it finish and run the same command again"
            + (f", or stop it (kill {holder.pid}) if it is stuck" if holder.pid else ""),
        )
        self.lock = lock
        self.holder = holder
        self.waited = waited


def _command() -> str:
    # argv may carry a mirror URL with credentials: keep the program name and the words that are
    # not URLs or paths, enough for a person to recognise the process.
    words = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"]
    words += ["<url>" if "://" in a else a for a in sys.argv[1:8]]
    return " ".join(words)


def _read_holder(fd: int) -> MutexOwner:
    try:
        raw = os.pread(fd, 4096, 0)
        data = loads(raw, max_bytes=4096, max_depth=2) if raw.strip() else {}
        if not isinstance(data, dict):
            return MutexOwner(None, "", "")
        pid = data.get("pid")
        return MutexOwner(pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
                      str(data.get("command") or "")[:200], str(data.get("started") or "")[:40])
    except (OSError, ValueError):
        return MutexOwner(None, "", "")


def _wait_for_record(fd: int, patience: float, poll: float) -> MutexOwner:
    """The holder's record, waiting up to ``patience`` seconds for it: a waiter may arrive between
    the holder's ``flock`` and its writing the record (or read a dead holder's, cut to nothing)."""
    deadline = time.monotonic() + patience
    while True:
        holder = _read_holder(fd)
        if holder.pid is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(poll)


def _take_or_name(fd: int, patience: float, poll: float) -> MutexOwner | None:
    """While the lock is busy, the holder's record once it is written (up to ``patience`` seconds; a
    waiter may arrive between the holder's ``flock`` and its record), or None when the lock came
    free meanwhile and is now ours: then there is nobody to name (a holder that let go before its
    record was read used to be named "another process")."""
    deadline = time.monotonic() + patience
    while True:
        holder = _read_holder(fd)
        if holder.pid is not None:
            return holder
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return holder
        time.sleep(poll)


def _open_lock(path: str) -> int:
    """The lock file, opened for writing its record by ``files.open_lock_file``'s rule.

    Raises:
        MutexError: it cannot be opened, or is not a regular file of one link.
    """
    advice = f"remove {path} (superfluid makes a new one) and run the command again"
    try:
        return open_lock_file(path)
    except NotALockFile as e:
        if e.strerror == "is a symbolic link":
            raise MutexError(f"{path} is a symbolic link; the install lock is never written through one",
                             advice=advice) from e
        raise MutexError(f"{path} {e.strerror}; the install lock is never written there", advice=advice) from e
    except OSError as e:
        raise MutexError(f"cannot open {path}: {e.strerror or e}",
                         advice="check the permissions of SUPERFLUID_HOME") from e


def mutex_owner(root: str | os.PathLike[str]) -> MutexOwner | None:
    """Who holds the install lock of the runtime at ``root`` now, or None when nobody does."""
    try:
        fd = os.open(os.path.join(root, LOCK),
                     os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # absent, or a link or something else planted: nobody holds a lock there
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def install_mutex(root: str | os.PathLike[str], *, timeout: float = 600.0,
                 on_wait: Callable[[MutexOwner], None] | None = None, command: str | None = None,
                 poll: float = 0.1, name: str = LOCK) -> Iterator[MutexOwner]:
    """Hold the runtime's ``.install.lock`` (``flock``, exclusive, across processes) for the block;
    ``name``: another lock file in ``root`` held the same way (``serve --sessions``' directory).

    The holder writes its pid, command and start time into the file, so that a waiter can say who
    it waits for: ``on_wait`` is called once, with that record, when the lock is busy. The kernel
    drops the lock when the holder dies, however it dies. Not reentrant.

    Raises:
        MutexBusy: still held after ``timeout`` seconds (names the holder).
        MutexError: the lock file cannot be opened (permissions of the home).
    """
    path = os.path.join(root, name)
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:
        raise MutexError(f"cannot make {e.filename or root}: {e.strerror or e}",
                        advice="check that SUPERFLUID_HOME is a writable directory") from e
    fd = _open_lock(path)
    held = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            deadline = time.monotonic() + timeout
            # the holder writes its record right after its flock: give it a moment, so the message
            # names it; a lock that comes free meanwhile is taken, and nobody is waited for
            holder = _take_or_name(fd, min(2.0, timeout), min(poll, 0.05))
            if holder is not None and on_wait is not None:
                on_wait(holder)
            while holder is not None:
                time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise MutexBusy(path, _wait_for_record(fd, 0.5, min(poll, 0.05)), timeout) from None
        held = True
        me = MutexOwner(os.getpid(), command or _command(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        record = (json.dumps(me.to_json()) + "\n").encode("utf-8")
        os.pwrite(fd, record, 0)  # then cut what a dead holder left: no instant where it reads empty
        os.ftruncate(fd, len(record))
        yield me
    finally:
        if held:
            try:
                os.ftruncate(fd, 0)  # the record says who holds it; nobody does now
            except OSError:
                pass
        os.close(fd)
