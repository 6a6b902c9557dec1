"""Our console scripts run the way every test runs them: ``superfluid``, ``superfluid-worker-<id>`` and
``superfluid-manifest`` of the test environment (``script``), in the environment a test run sees
(``environment``: the developer's shell less what would change or leak into the run), answering a
``Run`` (exit code, stdout, stderr); ``start`` leaves a long-running one (a server) running."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from superfluid.runtime.process import is_secret

__all__ = ["VENV_BIN", "script", "environment", "Run", "run", "start"]

ROOT = Path(__file__).resolve().parent.parent
#: where the console scripts are: the test environment's bin/ (SUPERFLUID_TEST_BIN names another)
VENV_BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))

#: prefixes of the variables that steer our commands, the engines, an OpenAI client or the Python under them
_STEERING = ("SUPERFLUID_", "BASERT_", "OPENAI_", "PYTHON")
#: names that change what a command does: CI turns the progress bar off, VIRTUAL_ENV is where MLX is looked for
_CHANGING = frozenset({"CI", "VIRTUAL_ENV"})


def script(name: str) -> str:
    """The path of the console script ``name`` (``superfluid``, ``superfluid-worker-basert``...), or of
    another program of the test environment (``python``, ``gunicorn``)."""
    return str(VENV_BIN / name)


def _leaks(name: str, value: str) -> bool:
    """A variable of the developer's shell a test run must not see: one that steers our commands
    (the native cache aside: it only says where built artifacts are), a proxy (every server here is
    on loopback), or a credential, by a word of its name or by a URL with userinfo in its value."""
    if name.startswith(_STEERING) and name != "SUPERFLUID_NATIVE_CACHE":
        return True
    if name in _CHANGING or "proxy" in name.lower():
        return True
    return is_secret(name, value)


def environment(home: Path | None = None, **extra: str) -> dict[str, str]:
    """What a test run of our commands sees: this process's environment less what leaks from the
    developer's shell (``_leaks``), SUPERFLUID_HOME naming ``home`` when given, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not _leaks(k, v)}
    if home is not None:
        env["SUPERFLUID_HOME"] = str(home)
    env.update(extra)
    return env


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run of a command."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def _argv(command: str | Path, argv: Sequence[str | Path]) -> list[str]:
    """``command`` (a console script's name, or the absolute path of one elsewhere: an install's
    launcher) and its arguments."""
    return [str(VENV_BIN / command), *map(str, argv)]


def run(command: str | Path, *argv: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        input: str | None = None, timeout: float | None = 120, prefix: Sequence[str | Path] = (),
        new_session: bool = False) -> Run:
    """Run ``command argv...`` to its end in ``env`` (default ``environment()``), stdin closed unless
    ``input`` is given; ``prefix`` goes before it (``strace ...``, ``setpriv ...``, ``python -X ...``);
    ``new_session``: in a session of its own. A run past ``timeout`` seconds raises
    ``subprocess.TimeoutExpired``."""
    done = subprocess.run([*map(str, prefix), *_argv(command, argv)], env=dict(environment() if env is None else env),
                          cwd=cwd, input=input, stdin=subprocess.DEVNULL if input is None else None,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          start_new_session=new_session)
    return Run(done.returncode, done.stdout, done.stderr)


def start(command: str | Path, *argv: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          stdout: int | IO[Any] = subprocess.PIPE, stderr: int | IO[Any] = subprocess.PIPE,
          new_session: bool = False) -> subprocess.Popen[str]:
    """Start ``command argv...`` as ``run`` would and leave it running (a server, a command to
    interrupt): its process, stdin closed, stdout and stderr pipes unless given."""
    return subprocess.Popen(_argv(command, argv), env=dict(environment() if env is None else env), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=new_session)
