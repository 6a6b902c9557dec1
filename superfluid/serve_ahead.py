"""``superfluid serve``'s worker started ahead of the face's decision: a fork, or its last choice primed.

See docs/host-contract.md, "1. Starting a server".
"""

# A server's cold start was two interpreters one after the other: the face imported, parsed the line
# and judged the install, and only then started the worker, which imported again before it loaded the
# engine (issue 45: 2.3x llama-server's). So, as soon as the face reads a serve line:
# - it forks itself (``worker_fork``, where the worker would be the one beside superfluid and the
#   environment holds no credential): the fork imports the serve path of the runtime the line chose
#   last (the shared serving stack, none kept) and waits; once the face has decided, it is told the
#   worker to be, or stopped;
# - else it starts the worker command line that line chose last *primed* (``runtime.worker``: it
#   imports, then waits for ``GO`` on its stdin before it loads an engine or binds a port), adopted only
#   when the worker chosen is that very command line in that very environment, and stopped otherwise;
# - and where that worker names its library and every file it loaded the last time this line served
#   is unchanged since (``Ahead.served`` keeps them with their fingerprints), it is told to load its
#   engine at once (``LOAD_FIRST``); it binds only once told ``GO``: what loads before the face decides
#   is byte for byte what the face last decided to serve, and nothing is served before it decides.
# What is kept is a guess, never a decision: a stale or garbled guess costs one process that never
# served, and a kept command line is started only when it is a worker the face itself could choose
# and that waits for ``GO`` (``startable``). The dispatch (``superfluid.cli``) imports this module by
# name for a ``serve`` line only, as it imports a command's module: every other command starts as before.

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid import __version__
from superfluid.installer.home.launcher import is_written_by_us
from superfluid.runtime import registry
from superfluid.runtime.kernel.fixes import ENV_LOG
from superfluid.runtime.kernel.home_cache import read_object, settled, unchanged, write
from superfluid.runtime.kernel.layout import cache_file, home, install_worker, runtime_dir, shipped_worker
from superfluid.runtime.kernel.lookup import GO, LOAD_FIRST, PRIMED_VARIABLE
from superfluid.runtime.process import worker_env
from superfluid.worker_fork import Forked, Process, fork_waiting, may_fork, preloads, runs_here

__all__ = ["Ahead", "begin", "startable", "FILE", "MAX_ENTRIES"]

#: the file of the home's cache that keeps, per serve line, the worker it chose last
FILE = "serve-workers.json"
#: serve lines kept at once (the newest last)
MAX_ENTRIES = 16
_FORMAT = 1
_MAX_BYTES = 256 << 10
_HELP = frozenset({"-h", "--help"})


def _key(line: Sequence[str], environ: Mapping[str, str]) -> str:
    """What the worker a serve line chooses may follow from besides the files the face judges (which
    it judges every time): the line, this superfluid and its interpreter, the working directory and
    ``SUPERFLUID_*`` (but the suite's hint report, new for every run). One digest: no value is
    written to disk."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    env = sorted((k, v) for k, v in environ.items() if k.startswith("SUPERFLUID_") and k != ENV_LOG)
    facts = [_FORMAT, __version__, list(line), sys.executable, sys.argv[0] if sys.argv else "", cwd, env]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def _kept(path: str) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The kept worker command lines by key, and what each line's worker loaded (``Ahead.served``); {} for
    a file of another shape (a cache only saves time)."""
    kept = read_object(path, max_bytes=_MAX_BYTES)
    if kept.get("format") != _FORMAT:
        return {}, {}
    entries, loads = kept.get("workers"), kept.get("loads")
    workers = {k: v for k, v in entries.items()
               if isinstance(v, list) and v and all(isinstance(a, str) and "\0" not in a for a in v)
               } if isinstance(entries, dict) else {}
    return workers, loads if isinstance(loads, dict) else {}


def _env_digest(env: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


def _loads_again(load: object, argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the worker ``argv`` may load its engine before the face decides: the last start that
    served this line served this very worker in this very environment, and every file it had loaded
    (and every place its loader looked) is as it was then (``home_cache.unchanged``)."""
    if not isinstance(load, dict) or load.get("argv") != list(argv) or load.get("env") != _env_digest(env):
        return False
    deps = load.get("deps")
    return isinstance(deps, list) and bool(deps) and unchanged(deps)


def _mapped(pid: int) -> set[str]:
    """The files process ``pid`` has mapped (its libraries, a model it maps), from ``/proc/<pid>/maps``."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    found = set()
    for ln in lines:
        fields = ln.split(None, 5)
        if len(fields) == 6 and fields[4] != "0" and fields[5].startswith("/") and not fields[5].endswith(" (deleted)"):
            found.add(fields[5])
    return found


def _loaded_from(pid: int, program: str, announced: Mapping[str, Any], env: Mapping[str, str]) -> set[str]:
    """Every path whose change could change what worker ``pid`` (``program`` in ``env``) loads: the files
    it mapped and their folders, the library and model it announced, its program, and where the dynamic
    loader and ggml's backend search look besides (``LD_LIBRARY_PATH``, ``/etc/ld.so.cache``, the working
    directory, the interpreter's folder)."""
    mapped = _mapped(pid)
    paths = mapped | {os.path.dirname(p) for p in mapped} | {program, "/etc/ld.so.cache",
                                                             os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(announced[k] for k in ("library", "path") if isinstance(announced.get(k), str))
    paths.update(d for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d)
    try:
        paths.add(os.getcwd())
    except OSError:
        pass
    return {os.path.abspath(p) for p in paths}


@dataclass
class Ahead:
    """A serve line's worker started ahead, and what keeping the next guess needs: the guess spawned
    primed, or a fork told to load it first (``proc``, told ``GO`` when chosen), or a fork waiting to be
    told the worker chosen (``waiting``); None each when not started, or used."""

    environ: Mapping[str, str]
    path: str
    key: str
    began: float
    guess: tuple[str, ...] | None = None
    env: dict[str, str] | None = None
    proc: Process | None = None
    waiting: Forked | None = None

    def adopt(self, argv: Sequence[str], env: Mapping[str, str]) -> Process | None:
        """The worker started ahead: the waiting fork, told to be ``argv`` in ``env`` when that worker
        runs in a fork (``worker_fork.runs_here``); the guess (spawned primed, or a fork told it), told
        ``GO``, when it is ``argv`` in ``env`` and still waiting; else None, and what was started is stopped."""
        waiting, self.waiting = self.waiting, None
        if waiting is not None:
            if runs_here(argv) is not None and waiting.poll() is None:
                try:
                    waiting.order(argv, env)
                    return waiting
                except (OSError, ValueError):
                    pass  # it ended while the face decided: the chosen worker is started as before
            _stop(waiting)
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if tuple(argv) == self.guess and dict(env) == self.env and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.write(GO)
                proc.stdin.close()
                return proc
            except (OSError, ValueError):
                pass  # it ended while the face decided: the chosen worker is started as before
        _stop(proc)
        return None

    def remember(self, argv: Sequence[str]) -> None:
        """Keep ``argv`` as the worker this line chooses (nothing written when it is kept already, nor
        where the home's cache cannot be written)."""
        if tuple(argv) == self.guess:
            return
        workers, loads = _kept(self.path)
        workers.pop(self.key, None)
        workers = dict(list(workers.items())[-(MAX_ENTRIES - 1):])
        workers[self.key] = list(argv)
        self._write(workers, loads)

    def served(self, pid: int, argv: Sequence[str], env: Mapping[str, str], announced: Mapping[str, Any]) -> None:
        """The worker ``pid`` (``argv`` in ``env``) serves, as the face decided: keep what it loaded, so
        that the next start of this line may load it before the face decides again, where the command
        line names the library (a library searched for may be another one next time) and nothing it
        loaded changed since the face began (a file changed meanwhile may not be the one loaded)."""
        workers, loads = _kept(self.path)
        rid = registry.worker_runtime(argv[0])
        entry = None
        if rid is not None and f"--{rid}-lib" in argv:
            deps = settled(sorted(_loaded_from(pid, argv[0], announced, env)), self.began)
            entry = None if deps is None else {"argv": list(argv), "env": _env_digest(env), "deps": deps}
        if loads.get(self.key) == entry:
            return
        loads.pop(self.key, None)
        if entry is not None:
            loads = dict(list(loads.items())[-(MAX_ENTRIES - 1):])
            loads[self.key] = entry
        self._write(workers, loads)

    def _write(self, workers: dict[str, list[str]], loads: dict[str, Any]) -> None:
        data = json.dumps({"format": _FORMAT, "workers": workers, "loads": loads}).encode()
        if len(data) <= _MAX_BYTES:
            write(home(self.environ), self.path, data)

    def close(self) -> None:
        """Stop the worker started ahead if nothing adopted it (a refusal, ``--help``, a failure)."""
        for proc in (self.proc, self.waiting):
            if proc is not None:
                _stop(proc)
        self.proc = self.waiting = None


def _stop(proc: Process) -> None:
    """End a worker that never loaded anything: killed (it is importing, or waiting for ``GO``) and reaped."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def startable(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether a kept ``argv`` is the serve line of one of this superfluid's own workers, which waits
    for ``GO`` before it loads anything: the one beside this superfluid, or an install's launcher in this
    home holding exactly the launcher this superfluid writes (``launcher.is_written_by_us``: one changed
    since is never run before the face has judged its install). Never a program the cache file alone
    names, nor one ``SUPERFLUID_WORKER_<ID>`` names (a worker of anyone's, which may not wait)."""
    if len(argv) < 2 or argv[1] != "serve" or not os.path.isabs(argv[0]):
        return False
    rid = registry.worker_runtime(argv[0])
    if rid is None:
        return False
    if shipped_worker(argv[0], rid):
        return True
    real = os.path.realpath(argv[0])
    root = os.path.realpath(runtime_dir(home(environ), rid))
    install = os.path.relpath(real, root).split(os.sep)[0] if real.startswith(root + os.sep) else None
    return (install is not None and real == os.path.realpath(install_worker(os.path.join(root, install), rid))
            and is_written_by_us(real, rid))


def begin(line: Sequence[str], environ: Mapping[str, str]) -> Ahead | None:
    """For ``superfluid <line>`` when it is a serve line (not a help page): the worker the same line
    chose last, started primed (told to load first where what it loads is unchanged since it last
    served: ``_loads_again``), or a fork waiting to be told the worker chosen (``worker_fork``), with what
    keeping the next guess needs; None for any other line."""
    if list(line[:1]) != ["serve"] or _HELP & set(line):
        return None
    path = cache_file(home(environ), FILE)
    ahead = Ahead(environ, path, _key(line, environ), time.time())
    workers, loads = _kept(path)
    guess = workers.get(ahead.key)
    if guess is not None and not startable(guess, environ):
        guess = None  # never started: the face decides alone
    here = runs_here(guess) if guess is not None else None
    env = worker_env(environ)
    primed = {**env, PRIMED_VARIABLE: LOAD_FIRST if guess and _loads_again(loads.get(ahead.key), guess, env) else "1"}
    if may_fork(environ) and (guess is None or here is not None):
        try:  # the worker beside superfluid, or none guessed: a fork of this process (``worker_fork``)
            waiting = fork_waiting(preloads(here))
        except OSError:
            return ahead
        if guess is None or primed[PRIMED_VARIABLE] != LOAD_FIRST:
            ahead.waiting = waiting  # told the worker chosen once the face decided
            return ahead
        try:
            waiting.order(guess, primed, close=False)  # it loads now, and binds when told GO
        except OSError:
            _stop(waiting)
            return ahead
        ahead.guess, ahead.env, ahead.proc = tuple(guess), env, waiting
        return ahead
    if guess is None:
        return ahead
    try:
        # no preexec_fn: a spawn, not a fork of this process (the worker dies with its face once told GO;
        # until then its stdin, closed as the face ends, says no)
        proc = subprocess.Popen(guess, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=primed)
    except OSError:
        return ahead  # gone since: the face decides, and starts the worker it chooses
    ahead.guess, ahead.env, ahead.proc = tuple(guess), env, proc
    return ahead
