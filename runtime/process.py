"""Running a worker: a scrubbed environment, stdin closed, a timeout, one line of JSON back.

See docs/runtimes.md, "What a worker's environment holds".
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.kernel.errors import WorkerFailed
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.lookup import PRIMED_VARIABLE

__all__ = ["scrubbed_env", "worker_env", "is_secret", "WorkerResult", "run_worker", "run_json", "DEFAULT_TIMEOUT",
           "OUTPUT_MAX_BYTES", "PYTHON_VARIABLE", "PRIMED_VARIABLE", "ARENAS_VARIABLE", "ARENAS", "start_worker",
           "finish_worker", "stop_worker", "answer_json"]

#: words of a variable's name that make it a credential (the name split at ``_``, ``-``, ``.``)
_SECRET_WORDS = frozenset({
    "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE",
    "KEY", "KEYS", "APIKEY", "CREDENTIAL", "CREDENTIALS", "CRED", "CREDS", "AUTH", "OAUTH", "AUTHORIZATION",
    "JWT", "COOKIE", "COOKIES", "WEBHOOK", "PAT", "PRIVATE", "SESSION", "DSN", "SIGNING",
})
#: and parts of a name that make it one even run together (``GITHUBTOKEN``, ``DBPASSWORD``)
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY", "ACCESSKEY",
                 "PRIVATEKEY", "WEBHOOK")
_USERINFO_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]+@")
_PEM_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")

#: the Python that runs this superfluid, handed to every worker it starts: an install's launcher
#: (``bin/superfluid-worker-<id>``) runs the adapter's worker with it (installer/home/publish.py)
PYTHON_VARIABLE = "SUPERFLUID_PYTHON"
#: glibc's bound on its malloc arenas, and the bound a worker gets unless the caller sets one: without it
#: every thread that allocates gets an arena of its own (up to 8 per core), and what a thread frees stays
#: in its arena: a server's worker grew from 229 to 530 MiB after 16 concurrent requests, 216 MiB with 2
#: (issue 45); two arenas keep the main thread's apart from the rest
ARENAS_VARIABLE, ARENAS = "MALLOC_ARENA_MAX", "2"
#: seconds a worker may take to answer a declaration or a check
DEFAULT_TIMEOUT = 30.0
#: bytes of a worker's stdout and of its stderr kept; a worker printing more is stopped
OUTPUT_MAX_BYTES = 4 << 20
#: seconds a killed worker's pipes are still read for its last words
_DRAIN = 2.0


def is_secret(name: str, value: str) -> bool:
    """A credential: by a word of its name (``AWS_ACCESS_KEY_ID``, ``CI_JOB_JWT``, ``VAULT_TOKEN_FILE``,
    ``SLACK_WEBHOOK_URL``, ``DOCKER_AUTH_CONFIG``, ``SSH_PASSPHRASE``...), by a part of it run
    together (``GITHUBTOKEN``), or by its value: a URL carrying userinfo (``u:p@``) anywhere in it, or
    a PEM private key."""
    upper = name.upper()
    if set(re.split(r"[^A-Z0-9]+", upper)) & _SECRET_WORDS:
        return True
    if any(part in upper for part in _SECRET_PARTS):
        return True
    return bool(_USERINFO_URL.search(value) or _PEM_KEY.search(value))


def scrubbed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without credentials (``is_secret``)."""
    return {k: v for k, v in environ.items() if not is_secret(k, v)}


def worker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A worker's environment: ``scrubbed_env``; ``SUPERFLUID_PYTHON`` naming this Python (unless the
    caller names one), so that an install's launcher runs the worker with the superfluid that asks,
    wherever the environment that made the install went; and ``MALLOC_ARENA_MAX=2`` (``ARENAS``; a
    value of the caller's is kept), so that memory freed on a server's connection threads is not held
    in arenas of their own."""
    env = scrubbed_env(environ)
    if not env.get(PYTHON_VARIABLE) and sys.executable:
        env[PYTHON_VARIABLE] = sys.executable
    if not env.get(ARENAS_VARIABLE):
        env[ARENAS_VARIABLE] = ARENAS
    return env


@dataclass(frozen=True, slots=True)
class WorkerResult:
    """What a worker run gave: its exit code and its output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def reason(self) -> str:
        """The worker's own last words, or a description of its exit."""
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        if lines:
            return lines[-1]
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return f"exited {self.returncode} without saying why"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's whole process group: children it started die with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int, deadline: float) -> bool:
    """Whether ``pid`` exits by ``deadline``, left unreaped (``WNOWAIT``)."""
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def _collect(proc: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes, str | None]:
    """Read stdout and stderr until both close, the deadline passes or one is too long; answers
    what was read (each capped) and why reading stopped early (None: both closed)."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    got = {out_fd: bytearray(), err_fd: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in got:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    why = None
    exited = False
    try:
        while sel.get_map():
            if not exited and _exited(proc.pid, 0):
                # it is done; a child it left may hold the pipes open: what is there is read, briefly
                exited, deadline = True, min(deadline, time.monotonic() + 0.2)
            left = deadline - time.monotonic()
            if left <= 0:
                why = None if exited else "timeout"
                break
            for key, _ in sel.select(min(left, 0.05)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = got[key.fd]
                buf += chunk[: OUTPUT_MAX_BYTES + 1 - len(buf)]
                if len(buf) > OUTPUT_MAX_BYTES:
                    why = "output"
                    break
            if why:
                break
    finally:
        sel.close()
    return bytes(got[out_fd][:OUTPUT_MAX_BYTES]), bytes(got[err_fd][:OUTPUT_MAX_BYTES]), why


def start_worker(argv: Sequence[str], *, env: Mapping[str, str], primed: bool = False) -> subprocess.Popen[bytes]:
    """Start a worker command line as ``run_worker`` runs it (in ``env``, the worker's environment as
    ``worker_env`` makes it; a process group of its own, stdin closed); ``primed``: its stdin a pipe
    and ``PRIMED_VARIABLE`` set, so that it makes ready (imports what its command needs) and waits
    until ``finish_worker`` closes that pipe. A worker started before what it checks is there (a
    staged install's, while the archives arrive).

    Raises:
        WorkerFailed: it could not start (``lasting``).
    """
    env = {**env, PRIMED_VARIABLE: "1"} if primed else dict(env)
    name = os.path.basename(argv[0])
    try:
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE if primed else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    except FileNotFoundError:
        raise WorkerFailed(name, f"not found at {argv[0]}", lasting=True) from None
    except PermissionError:
        raise WorkerFailed(name, f"{argv[0]} is not executable", lasting=True) from None
    except OSError as e:
        raise WorkerFailed(name, f"could not start: {e}", lasting=True) from None


def stop_worker(proc: subprocess.Popen[bytes]) -> int:
    """Kill what is left of the worker's process group, reap it and close its pipes; its exit code."""
    # the worker has exited (a zombie, not reaped, so its group id cannot be reused) or is to be
    # stopped: either way whatever is left of its process group goes, then it is reaped
    _kill_group(proc)
    code = proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:  # a primed worker's stdin whose reader is gone
                pass
    return code


def finish_worker(proc: subprocess.Popen[bytes], argv: Sequence[str], *,
                  timeout: float = DEFAULT_TIMEOUT) -> WorkerResult:
    """Let a started worker go (a primed one's stdin closed) and collect its answer within
    ``timeout`` seconds from now, as ``run_worker`` does; it is stopped whatever happens.

    Raises:
        WorkerFailed: as ``run_worker`` (a timeout or too much output).
    """
    name = os.path.basename(argv[0])
    why: str | None = "interrupted"
    try:
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:  # it is gone already: its exit is collected below
                pass
        deadline = time.monotonic() + timeout
        out, err, why = _collect(proc, deadline)
        if why is None and not _exited(proc.pid, min(deadline, time.monotonic() + _DRAIN)):
            why = "timeout"
    finally:
        code = stop_worker(proc)
    if why == "timeout":
        raise WorkerFailed(name, f"did not answer within {timeout:g} s", lasting=True)
    if why == "output":
        raise WorkerFailed(name, f"printed more than {OUTPUT_MAX_BYTES} bytes (stopped)")
    return WorkerResult(tuple(argv), code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def run_worker(argv: Sequence[str], *, env: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT) -> WorkerResult:
    """Run a worker command line in ``env`` (``worker_env``'s) with stdin closed, in a
    process group of its own, its output capped at ``OUTPUT_MAX_BYTES`` a stream.

    The timeout bounds the whole run: a worker still running (or whose children still hold its
    output open) when it passes is killed with its process group, children included.

    Raises:
        WorkerFailed: it could not start, did not finish within ``timeout`` seconds, or printed
            more than the cap (``lasting`` for the first two: asking again now fails the same way).
    """
    return finish_worker(start_worker(argv, env=env), argv, timeout=timeout)


def answer_json(result: WorkerResult, accept: Sequence[int] = (0,)) -> Any:
    """The one line of JSON a worker run answered on stdout (its last line).

    Raises:
        WorkerFailed: it exited with a code not in ``accept``, or its stdout was not JSON.
    """
    name = os.path.basename(result.argv[0])
    if result.returncode not in accept:
        raise WorkerFailed(name, result.reason())
    text = result.stdout.strip()
    if not text:
        raise WorkerFailed(name, f"printed nothing ({result.reason()})")
    try:
        return loads(text.splitlines()[-1], max_bytes=OUTPUT_MAX_BYTES)
    except UntrustedJson as e:
        shown = (text[:80] + "...") if len(text) > 80 else text
        why = "" if e.fault.startswith("is not valid JSON") else f" ({e.fault})"
        raise WorkerFailed(name, f"answered with something other than JSON: {shown!r}{why}") from None


def run_json(argv: Sequence[str], *, env: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT,
             accept: Sequence[int] = (0,)) -> tuple[Any, WorkerResult]:
    """Run a worker (in ``env``, as ``run_worker``) whose answer is one line of JSON on stdout; the
    parsed answer and the run.

    Raises:
        WorkerFailed: it failed to start, hung, exited with a code not in ``accept``, or its
            stdout was not JSON.
    """
    result = run_worker(argv, env=env, timeout=timeout)
    return answer_json(result, accept), result
