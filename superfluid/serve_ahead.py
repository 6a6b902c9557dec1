"""``superfluid serve``'s worker started ahead of the face's decision: the one its line chose last, primed.

See docs/host-contract.md, "1. Starting a server".
"""

# A server's cold start was two interpreters one after the other: the face imported, parsed the line
# and judged the install, and only then started the worker, which imported again before it loaded the
# engine (issue 45: 2.3x llama-server's). So the face keeps, per serve line, the worker command line
# that line chose the last time, and starts that worker *primed* as soon as it reads the line
# (``runtime.worker``: it imports what serving needs, then waits for ``GO`` on its stdin before it
# loads an engine or binds a port) while the face imports, parses and judges exactly as it always does.
# ``supervise`` then adopts the primed worker only when the worker it chose is that very command line
# in that very environment; any other choice (or a refusal) stops it, unseen. What is kept is a guess,
# never a decision: nothing is loaded before the face has decided, a stale or garbled guess costs one
# process that never loaded anything, and a guess is started only when it is a worker the face itself
# could choose and that waits for ``GO`` (``startable``). The dispatch (``superfluid.cli``) imports this
# module by name for a ``serve`` line only, as it imports a command's module: every other command
# starts as before.

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from superfluid import __version__
from superfluid.installer.home.launcher import is_written_by_us
from superfluid.runtime import registry
from superfluid.runtime.kernel.fixes import ENV_LOG
from superfluid.runtime.kernel.home_cache import read_object, write
from superfluid.runtime.kernel.layout import cache_file, home, install_worker, runtime_dir, shipped_dirs, worker_command
from superfluid.runtime.kernel.lookup import GO, PRIMED_VARIABLE
from superfluid.runtime.process import worker_env

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


def _kept(path: str) -> dict[str, list[str]]:
    """The kept worker command lines by key; {} for a file of another shape (a cache only saves time)."""
    kept = read_object(path, max_bytes=_MAX_BYTES)
    entries = kept.get("workers") if kept.get("format") == _FORMAT else None
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items()
            if isinstance(v, list) and v and all(isinstance(a, str) and "\0" not in a for a in v)}


@dataclass
class Ahead:
    """A serve line's worker started ahead (``proc``, None when no guess was kept or it was used),
    and what keeping the next guess needs."""

    environ: Mapping[str, str]
    path: str
    key: str
    guess: tuple[str, ...] | None = None
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def adopt(self, argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes] | None:
        """The worker started ahead, told ``GO``, when it is ``argv`` in ``env`` and still waiting;
        else None, and it is stopped."""
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
        kept = _kept(self.path)
        kept.pop(self.key, None)
        kept = dict(list(kept.items())[-(MAX_ENTRIES - 1):])
        kept[self.key] = list(argv)
        data = json.dumps({"format": _FORMAT, "workers": kept}).encode()
        if len(data) <= _MAX_BYTES:
            write(home(self.environ), self.path, data)

    def close(self) -> None:
        """Stop the worker started ahead if nothing adopted it (a refusal, ``--help``, a failure)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
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
    names = {worker_command(rid): rid for rid in registry.IDS}
    rid = names.get(os.path.basename(argv[0]))
    if rid is None:
        return False
    real = os.path.realpath(argv[0])
    if any(real == os.path.realpath(os.path.join(d, worker_command(rid))) for d in shipped_dirs()):
        return True
    root = os.path.realpath(runtime_dir(home(environ), rid))
    install = os.path.relpath(real, root).split(os.sep)[0] if real.startswith(root + os.sep) else None
    return (install is not None and real == os.path.realpath(install_worker(os.path.join(root, install), rid))
            and is_written_by_us(real, rid))


def begin(line: Sequence[str], environ: Mapping[str, str]) -> Ahead | None:
    """For ``superfluid <line>`` when it is a serve line (not a help page): the worker the same line
    chose last, started primed, with what keeping the next guess needs; None for any other line."""
    if list(line[:1]) != ["serve"] or _HELP & set(line):
        return None
    path = cache_file(home(environ), FILE)
    ahead = Ahead(environ, path, _key(line, environ))
    guess = _kept(path).get(ahead.key)
    if guess is None or not startable(guess, environ):
        return ahead
    env = {**worker_env(environ), PRIMED_VARIABLE: "1"}
    try:
        # no preexec_fn: a spawn, not a fork of this process (the worker dies with its face once told GO;
        # until then its stdin, closed as the face ends, says no)
        proc = subprocess.Popen(guess, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError:
        return ahead  # gone since: the face decides, and starts the worker it chooses
    ahead.guess, ahead.env, ahead.proc = tuple(guess), worker_env(environ), proc
    return ahead
