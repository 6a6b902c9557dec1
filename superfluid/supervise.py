"""``superfluid serve``'s child: start the worker's ``serve``, announce it, forward signals, end with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from superfluid.runtime.kernel.errors import ModelLoadFailed, SuperfluidError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.layout import home, install_dir, runtime_dir
from superfluid.runtime.process import worker_env
from superfluid.runtime.worker import die_with_parent
from superfluid.serve_ahead import Ahead
from superfluid.serve_line import Ready, ServeCommand, runtime_argv
from superfluid.worker_fork import Process

__all__ = ["Check", "serve_child", "worker_line", "startup_line", "worker_reason"]

#: signals forwarded to the worker (each stops it cleanly)
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: bytes of the worker's ready line read (one small JSON object)
_READY_MAX = 64 << 10


def worker_line(ready: Ready, line: ServeCommand) -> list[str]:
    """The worker's command line: its serve flags, then the runtime's checked options."""
    argv = [ready.worker, "serve", "--model", line.model, "--host", line.host, "--port", str(line.port),
            "--queue", str(line.queue)]
    if line.max_context is not None:
        argv += ["--max-context", str(line.max_context)]
    return argv + runtime_argv(ready.runtime_id, ready.values)


def worker_reason(stderr_lines: list[str], runtime_id: str) -> str:
    """The worker's last words without its name (``superfluid-worker-<id>: ``) or ``model load failed: ``."""
    lines = [ln.strip() for ln in stderr_lines if ln.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for prefix in (f"superfluid-worker-{runtime_id}: ", "model load failed: "):
        last = last.removeprefix(prefix)
    return last


#: the runtime's check as the supervisor asks it (``commands.serve.check_of``): its report; raises
#: ``NotServable`` when it refuses. The worker may start before the check was asked: it is asked then
#: only to say why the worker did not start, or who named the library the worker announces.
Check = Callable[[], Mapping[str, Any]]


def _where(ready: Ready, library: str | None, environ: Mapping[str, str], check: Check) -> str:
    """``installed: <install dir>`` or ``library: <path>, named by <flag or variable>`` (the flag
    the line gave, else who the check says named it).

    Raises:
        NotServable: the check, asked, refuses.
    """
    if not library:
        return f"worker: {ready.worker}"
    root = os.path.realpath(runtime_dir(home(environ), ready.runtime_id))
    real = os.path.realpath(library)
    if real.startswith(root + os.sep):
        install = real[len(root) + 1:].split(os.sep, 1)[0]
        return f"installed: {install_dir(home(environ), ready.runtime_id, install)}"
    named = f"--{ready.runtime_id}-lib" if "lib" in ready.values else check().get("named")
    return f"library: {library}" + (f", named by {named}" if named else "")


def startup_line(ready: Ready, announced: Mapping[str, Any], environ: Mapping[str, str], check: Check) -> str:
    """``superfluid: llamacpp b11312 (v1) serves tiny.gguf on http://127.0.0.1:8080 (installed: ...)``.

    Raises:
        NotServable: the check, asked for who named the library, refuses.
    """
    version = str(announced.get("runtime") or "").removeprefix("llama.cpp ")
    if "layout" in announced:
        detail = f" ({announced['layout']})"
    elif "abi" in announced:
        detail = f" (ABI {announced['abi']})" if announced["abi"] is not None else " (unnumbered)"
    else:
        detail = ""
    model = os.path.basename(str(announced.get("path") or ""))
    where = _where(ready, announced.get("library"), environ, check)
    return (f"superfluid: {ready.runtime_id} {version}{detail} serves {model} on {announced.get('listening')} "
            f"({where})")


class _Child:
    """The running worker: its stderr kept (and passed through once it is ready), the signals forwarded."""

    def __init__(self, argv: list[str], environ: Mapping[str, str], ahead: Ahead | None = None) -> None:
        self.stopping: int | None = None
        self.lines: list[str] = []
        self.passing = False
        self.lock = threading.Lock()
        self.previous = {s: signal.signal(s, self._forward) for s in _FORWARDED}
        self.argv, self.env = argv, worker_env(environ)
        adopted = ahead.adopt(argv, self.env) if ahead is not None else None  # the very worker, started ahead
        try:
            self.proc: Process = adopted or subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                             stderr=subprocess.PIPE, env=self.env,
                                                             preexec_fn=die_with_parent if sys.platform == "linux"
                                                             else None)
        except OSError as e:
            self.restore()
            raise SuperfluidError(f"cannot start {argv[0]}: {e.strerror or e}") from e
        if ahead is not None:
            ahead.remember(argv)  # the next start of this line starts it ahead
        self.reader = threading.Thread(target=self._read_stderr, name="worker-stderr", daemon=True)
        self.reader.start()
        if self.stopping is not None:  # a signal came while it started
            self.proc.send_signal(self.stopping)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = signum
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            text = raw.decode("utf-8", "replace")
            with self.lock:
                self.lines.append(text)
                if self.passing:
                    sys.stderr.write(text)
                    sys.stderr.flush()

    def ready_line(self) -> dict[str, Any] | None:
        """The worker's ready line, or None when it ended (or said something else) first."""
        assert self.proc.stdout is not None
        raw = self.proc.stdout.readline(_READY_MAX + 1)
        try:
            announced = loads(raw, max_bytes=_READY_MAX) if raw.strip() else None
        except UntrustedJson:
            return None
        return announced if isinstance(announced, dict) and "listening" in announced else None

    def wait(self) -> int:
        code = self.proc.wait()
        self.reader.join(5)
        return code

    def restore(self) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def _ended(child: _Child, code: int, runtime_id: str, check: Check, *, ready: bool) -> int:
    """The exit code of this process after the worker ended with ``code`` (``ready``: after its ready
    line); ``check`` is asked when it failed before.

    Raises:
        NotServable: it failed before it was ready, and the check says the runtime cannot run here.
        ModelLoadFailed: it exited 3 before it was ready.
        SuperfluidError: it failed otherwise.
    """
    if child.stopping is not None and code in (0, -child.stopping, -signal.SIGTERM):
        return 0  # stopped as asked
    if ready and code == 0:
        return 0
    if not ready:
        check()  # a runtime that cannot run here is refused as the check says it (exit 4), before its model
    reason = worker_reason(child.lines, runtime_id)
    if not ready and code == 3:
        raise ModelLoadFailed(f"the model did not load: {reason or 'the worker gave no reason'}")
    if code < 0:
        reason = reason or f"killed by signal {-code}"
    what = "stopped" if ready else "did not start serving"
    raise SuperfluidError(f"the {runtime_id} worker {what} (exit {code}): {reason or 'it gave no reason'}")


def serve_child(ready: Ready, line: ServeCommand, environ: Mapping[str, str], check: Check,
                ahead: Ahead | None = None, started: Callable[[], None] | None = None) -> int:
    """Run the worker until it stops; 0 for a clean stop. ``check``: the runtime's check, asked when
    the worker fails before it is ready and when the startup line must say who named its library.
    ``ahead``: the worker this line chose last, started before the face decided (``serve_ahead``),
    used when it is the one chosen now. ``started``: called once the startup line is out (the face's
    dispatch gives back the garbage collector it paused for the start: ``cli._pause_gc``).

    Raises:
        NotServable: the worker failed before it was ready, and the check says why (exit 4).
        ModelLoadFailed: the worker could not load the model (exit 3).
        SuperfluidError: it could not start, or failed (exit 1).
    """
    child = _Child(worker_line(ready, line), environ, ahead)
    try:
        announced = child.ready_line()
        if announced is None:
            return _ended(child, child.wait(), ready.runtime_id, check, ready=False)
        said = startup_line(ready, announced, environ, check)
        with child.lock:
            sys.stderr.writelines(child.lines)  # what it said while loading (warnings), now that it serves
            child.passing = True
        sys.stdout.write(said + "\n")
        sys.stdout.flush()
        if ahead is not None:  # what it loaded, kept for the next start of this line
            ahead.served(child.proc.pid, child.argv, child.env, announced)
        if started is not None:
            started()
        return _ended(child, child.wait(), ready.runtime_id, check, ready=True)
    finally:
        if child.proc.poll() is None:
            child.proc.kill()  # an exception on our side: never leave the worker behind
            child.proc.wait()
        child.restore()
