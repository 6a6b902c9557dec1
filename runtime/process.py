"""Running a worker: a scrubbed environment, stdin closed, a timeout, one line of JSON back (SPEC §8.4).

Used by the face (asking workers for declarations and checks) and by the installer (probing a staged
install). Nothing here imports a native library.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.errors import WorkerFailed

__all__ = ["scrubbed_env", "is_secret", "WorkerResult", "run_worker", "run_json"]

_SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIALS", "PAT")
_USERINFO_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]+@")

#: seconds a worker may take to answer a declaration or a check
DEFAULT_TIMEOUT = 30.0


def is_secret(name: str, value: str) -> bool:
    """A credential by name (``*_TOKEN``, ``*SECRET*``...) or a URL carrying userinfo (``u:p@``)."""
    upper = name.upper()
    if any(upper.endswith(s) or upper.endswith(s + "S") for s in _SECRET_SUFFIXES):
        return True
    if "SECRET" in upper or "PASSWORD" in upper:
        return True
    return bool(_USERINFO_URL.match(value.strip()))


def scrubbed_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without credentials (SPEC §8.4)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not is_secret(k, v)}


@dataclass(frozen=True)
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


def run_worker(argv: Sequence[str], *, environ: Mapping[str, str] | None = None,
               timeout: float = DEFAULT_TIMEOUT) -> WorkerResult:
    """Run a worker command line in a scrubbed environment with stdin closed.

    Raises:
        WorkerFailed: it could not start, or it did not finish within ``timeout`` seconds.
    """
    env = scrubbed_env(environ)
    name = os.path.basename(argv[0])
    try:
        done = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              env=env, timeout=timeout, check=False)
    except FileNotFoundError:
        raise WorkerFailed(name, f"not found at {argv[0]}") from None
    except PermissionError:
        raise WorkerFailed(name, f"{argv[0]} is not executable") from None
    except subprocess.TimeoutExpired:
        raise WorkerFailed(name, f"did not answer within {timeout:g} s") from None
    except OSError as e:
        raise WorkerFailed(name, f"could not start: {e}") from None
    return WorkerResult(tuple(argv), done.returncode, done.stdout, done.stderr)


def run_json(argv: Sequence[str], *, environ: Mapping[str, str] | None = None,
             timeout: float = DEFAULT_TIMEOUT, accept: Sequence[int] = (0,)) -> tuple[Any, WorkerResult]:
    """Run a worker whose answer is one line of JSON on stdout; the parsed answer and the run.

    Raises:
        WorkerFailed: it failed to start, hung, exited with a code not in ``accept``, or its
            stdout was not JSON.
    """
    result = run_worker(argv, environ=environ, timeout=timeout)
    name = os.path.basename(argv[0])
    if result.returncode not in accept:
        raise WorkerFailed(name, result.reason())
    text = result.stdout.strip()
    if not text:
        raise WorkerFailed(name, f"printed nothing ({result.reason()})")
    try:
        return json.loads(text.splitlines()[-1]), result
    except ValueError:
        shown = (text[:80] + "...") if len(text) > 80 else text
        raise WorkerFailed(name, f"answered with something other than JSON: {shown!r}") from None
