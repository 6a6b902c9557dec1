"""A worker beside this superfluid run in a fork of the face: no second interpreter start.

See docs/host-contract.md, "1. Starting a server".
"""

# ``serve_ahead`` starts a serve line's worker before the face decides; spawned, that worker paid a
# whole interpreter start and every import the face had already made (85 ms of a restart's 250). When
# the worker is the console script beside this superfluid, running this very interpreter, its process
# can instead be a fork of the face, made as the face reads the line: the fork imports the serve path
# it will likely need and waits; once the face has decided, it is told the worker to be (``order``),
# takes that worker's environment, argv and process name, and calls the script's ``main``, as the
# script would. Only where that is the same process the script would be: the script is pip's for the
# worker's own module under this interpreter, the face runs no thread, and the environment holds
# nothing the worker must not get (``process.is_secret``: a spawned worker gets it scrubbed, a fork
# would keep it in its memory). Anything else is spawned, as before.

from __future__ import annotations

import ctypes
import gc
import io
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import IO, NoReturn, Protocol

from superfluid.runtime import registry
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.layout import shipped_worker, worker_module
from superfluid.runtime.process import ARENAS_VARIABLE, is_secret
from superfluid.runtime.worker import die_with_parent, serve_module

__all__ = ["Process", "Forked", "may_fork", "runs_here", "preloads", "fork_waiting"]

#: mallopt's M_ARENA_MAX (malloc.h): what ``MALLOC_ARENA_MAX`` sets at a process's start
_M_ARENA_MAX = -8
#: what a waiting fork imports when no runtime is guessed: the serving stack every worker's serve shares
_SHARED = ("superfluid.runtime.worker", "superfluid.runtime.serving.http")
#: bytes of an order read at most
_ORDER_MAX = 1 << 20
#: PR_SET_NAME (linux/prctl.h): the process's name in ps and top (the script's, as its exec would set it)
_PR_SET_NAME = 15
_SCRIPT_HEAD = 4096


class Process(Protocol):
    """What the face uses of a worker process, spawned (``subprocess.Popen``) or forked (``Forked``)."""

    @property
    def pid(self) -> int: ...
    @property
    def stdin(self) -> IO[bytes] | None: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...
    def poll(self) -> int | None: ...
    def wait(self) -> int: ...
    def kill(self) -> None: ...
    def send_signal(self, sig: int) -> None: ...


class Forked:
    """A forked worker, used as a ``subprocess.Popen`` is: its pipes, its exit code once reaped (a
    signal's negated), ``poll``, ``wait``, ``kill``, ``send_signal``."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def _reaped(self, flags: int) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped already (by a signal handler's poll): as Popen, 0 unless known
            pid, status = self.pid, 0
        if pid == self.pid and self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        if not self._lock.acquire(blocking=False):
            return self.returncode  # another thread is waiting for it
        try:
            return self._reaped(os.WNOHANG)
        finally:
            self._lock.release()

    def wait(self) -> int:
        """Its exit code once it ends."""
        with self._lock:
            code = self._reaped(0)
        assert code is not None
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def order(self, argv: Sequence[str], env: Mapping[str, str], *, close: bool = True) -> None:
        """Tell a waiting fork (``fork_waiting``) the worker to be: ``argv`` in ``env``. Its stdin is
        closed after, as a spawned worker's is empty; not with ``close`` false, for a worker started
        primed (``env`` says so), which then reads ``GO`` there as a spawned one does.

        Raises:
            OSError: it ended already.
        """
        assert self.stdin is not None
        try:
            self.stdin.write(json.dumps({"argv": list(argv), "env": dict(env)}).encode() + b"\n")
            self.stdin.flush()
        finally:
            if close:
                self.stdin.close()


def may_fork(environ: Mapping[str, str]) -> bool:
    """Whether a worker may run in a fork of this process at all: it can fork, runs no thread, and
    ``environ`` holds nothing a worker's environment leaves out (``process.is_secret``)."""
    if not hasattr(os, "fork") or ("threading" in sys.modules and threading.active_count() != 1):
        return False
    return not any(is_secret(k, v) for k, v in environ.items())


def runs_here(argv: Sequence[str]) -> str | None:
    """The runtime whose worker ``argv`` starts when a fork of this process running its ``worker_module``'s
    ``main`` is that worker: ``argv[0]`` is the worker beside this superfluid, a script for this
    interpreter that runs that module; else None."""
    rid = registry.worker_runtime(argv[0]) if argv else None
    if rid is None or not shipped_worker(argv[0], rid):
        return None
    try:
        with open(argv[0], "rb") as f:
            head = f.read(_SCRIPT_HEAD)
    except OSError:
        return None
    first, _, body = head.partition(b"\n")
    runs = f"from {worker_module(rid)} import main".encode()
    return rid if first == b"#!" + os.fsencode(sys.executable) and runs in body else None


def preloads(runtime_id: str | None) -> list[str]:
    """What a waiting fork imports while the face decides: the serve path of ``runtime_id``'s worker (the
    one its line chose last), else the serving stack every worker shares."""
    if runtime_id is None:
        return list(_SHARED)
    worker = worker_module(runtime_id)
    return [worker, serve_module(worker.rpartition(".")[0])]


def fork_waiting(preload: Sequence[str]) -> Forked:
    """A fork of this process, its stdin, stdout and stderr piped, that imports the modules ``preload``
    names, then waits for its order (``Forked.order``): the worker to become; anything else (its stdin
    closed, this process gone) ends it, having loaded nothing.

    Raises:
        OSError: no process could be made, or this process's own output could not be flushed first.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()  # nothing of the face's is left in a buffer the fork would write again
    except ValueError as e:  # closed: nothing to write twice, but nothing to fork beside either
        raise OSError(str(e)) from e
    face = os.getpid()
    fds = os.pipe(), os.pipe(), os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (fd for pair in fds for fd in pair):
            os.close(fd)
        raise
    if pid == 0:
        _waiting(face, fds, preload)
    (r0, w0), (r1, w1), (r2, w2) = fds
    for fd in (r0, w1, w2):
        os.close(fd)
    return Forked(pid, os.fdopen(w0, "wb"), os.fdopen(r1, "rb"), os.fdopen(r2, "rb"))


def _standard_streams() -> None:
    """``sys.stdin``, ``stdout`` and ``stderr`` on descriptors 0, 1 and 2 as an interpreter's start makes
    them (its encodings; stderr line-buffered, backslashreplace), whatever the face had put there."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        was = getattr(sys, f"__{name}__", None)
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(buffered, encoding=getattr(was, "encoding", None) or "utf-8",
                                  errors=getattr(was, "errors", None) or ("backslashreplace" if fd == 2 else "strict"),
                                  line_buffering=fd == 2 or raw.isatty())
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _preload(name: str) -> None:
    try:
        import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise  # a module the worker's own imports miss: said now, as its start would
        # a runtime without that module (mlx serves no model here): its order says what to run


def _read_order() -> tuple[str, list[str], dict[str, str]] | None:
    """The order on stdin: the runtime of the worker to be, its argv and environment; None when its stdin
    closed, or for anything but an order."""
    line = sys.stdin.buffer.readline(_ORDER_MAX + 1)
    try:
        order = loads(line, max_bytes=_ORDER_MAX) if line.endswith(b"\n") else None
    except UntrustedJson:
        return None
    argv, env = (order.get("argv"), order.get("env")) if isinstance(order, dict) else (None, None)
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return None
    rid = registry.worker_runtime(argv[0])
    if rid is None:
        return None  # no worker of this superfluid's
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        return None
    return rid, argv, env


def _waiting(face: int, fds: tuple[tuple[int, int], ...], preload: Sequence[str]) -> NoReturn:
    """The fork: its stdio, the imports, then the worker it is told to be (its ``main``, with the
    environment, command line and process name its exec would have given it); never returns."""
    code = 0
    try:
        (r0, w0), (r1, w1), (r2, w2) = fds
        for fd, to in ((r0, 0), (w1, 1), (w2, 2)):
            os.dup2(fd, to)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        _standard_streams()
        for name in preload:
            _preload(name)
        order = _read_order()
        if order is None:
            os._exit(0)  # not the worker chosen, nothing to serve, or the face gone: nothing was loaded
        die_with_parent()
        if os.getppid() != face:
            os._exit(0)
        rid, argv, env = order
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        libc = ctypes.CDLL(None, use_errno=True)
        if env.get(ARENAS_VARIABLE, "").isdigit():  # read by malloc as a process starts: set as it would
            libc.mallopt(_M_ARENA_MAX, int(env[ARENAS_VARIABLE]))
        libc.prctl(_PR_SET_NAME, os.fsencode(os.path.basename(argv[0]))[:15], 0, 0, 0)
        gc.enable()  # as a new interpreter starts (the face paused it for its own start)
        code = int(import_module(worker_module(rid)).main(list(argv[1:])))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker's own end: said on its stderr, as an uncaught error
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - its stdout gone: nothing more to say
            code = code or 1
        os._exit(code)
