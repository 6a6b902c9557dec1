"""A read-only command's whole output, kept while nothing it was computed from has changed."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from superfluid import __version__
from superfluid.runtime import registry
from superfluid.runtime.kernel.fixes import ENV_LOG
from superfluid.runtime.kernel.home_cache import RACY_SECONDS, read_object, settled, unchanged, write
from superfluid.runtime.kernel.layout import cache_file, home, linked_between

__all__ = ["KEPT_COMMANDS", "KEEP_SECONDS", "RACY_SECONDS", "lookup", "keep"]

#: the commands whose output may be kept (the first word of the command line): runtimes --json is
#: 1.62x a bare start kept, 4.19x computed (benchmarks/bench_cli.py; superfluid.cli, "Start-up")
KEPT_COMMANDS = frozenset({"runtimes"})
#: seconds a kept output is printed again at most (a bound on what no stat sees: a GPU plugged in)
KEEP_SECONDS = 300.0
#: 2: the inputs are one digest of the variables that change the answer (1 stored every variable's
#: value, credentials included: a file of that shape is deleted on sight)
_FORMAT = 2
_FILE = "outputs.json"
#: command lines kept at once (``runtimes``, ``runtimes --json``... the newest last)
_MAX_ENTRIES = 8
_MAX_BYTES = 1 << 20


def _path(environ: Mapping[str, str]) -> str:
    return cache_file(home(environ), _FILE)


def _inputs(argv: Sequence[str], environ: Mapping[str, str], names: Sequence[str]) -> str:
    """A digest of what the output is a function of besides the files: command line, version,
    interpreter, working directory, ``SUPERFLUID_*`` (but the file the suite's hint report is written
    to, ``fixes.ENV_LOG``: it changes no answer) and the variables ``names`` (one digest: no value is
    written to disk)."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    env = sorted((k, v) for k, v in environ.items()
                 if (k.startswith("SUPERFLUID_") and k != ENV_LOG) or k in names)
    facts = [_FORMAT, __version__, list(argv), sys.executable, sys.argv[0] if sys.argv else "", cwd, env]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def _read(path: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The kept outputs in ``path``; a file of another format is removed (format 1 held the values
    of every variable in the environment, credentials included)."""
    kept = read_object(path, max_bytes=_MAX_BYTES)
    if kept and kept.get("format") != _FORMAT:
        _remove(path, environ)
        return {}
    outputs = kept.get("outputs")
    return outputs if isinstance(outputs, dict) else {}


def _remove(path: str, environ: Mapping[str, str]) -> None:
    """Remove the kept outputs, never through a link out of the home."""
    if linked_between(home(environ), os.path.dirname(path)) is not None:
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def _kept_here(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether ``superfluid <argv>`` may be answered from, or into, the kept outputs: a kept
    command, and no worker named (``registry.env_override``, empty meaning unset as for the catalog)."""
    return bool(argv) and argv[0] in KEPT_COMMANDS and not any(
        environ.get(registry.env_override(runtime_id)) for runtime_id in registry.IDS)


def lookup(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The kept output of ``superfluid <argv>`` when nothing it was computed from has changed, else None."""
    if not _kept_here(argv, environ):
        return None
    entry = _read(_path(environ), environ).get(" ".join(argv))
    if not isinstance(entry, dict) or not isinstance(entry.get("output"), str):
        return None
    at, deps = entry.get("at"), entry.get("deps")
    if not isinstance(at, (int, float)) or not 0 <= time.time() - at < KEEP_SECONDS or not isinstance(deps, list):
        return None
    names = entry.get("vars")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    if entry.get("inputs") != _inputs(argv, environ, names) or not unchanged(deps):
        return None
    output: str = entry["output"]
    return output


def keep(argv: Sequence[str], environ: Mapping[str, str], output: str, *, began: float, deps: Iterable[str],
         names: Sequence[str]) -> bool:
    """Keep ``output`` of ``superfluid <argv>``, computed from ``began`` (a ``time.time()``) on, from
    the paths ``deps`` and the variables ``names`` (besides ``SUPERFLUID_*``: ``commands.runtimes``
    says which). Answers whether it was kept: never for a command not in ``KEPT_COMMANDS``, while a
    worker is named, after a racy change, or where the home's cache cannot be written (or is a link
    out of it: nothing is written through one)."""
    if not _kept_here(argv, environ):
        return False
    stats = settled(deps, began)
    if stats is None:
        return False
    path = _path(environ)
    kept = _read(path, environ)
    kept.pop(" ".join(argv), None)
    kept = dict(list(kept.items())[-(_MAX_ENTRIES - 1):])
    names = list(names)
    kept[" ".join(argv)] = {"at": began, "vars": names, "inputs": _inputs(argv, environ, names),
                            "deps": stats, "output": output}
    data = json.dumps({"format": _FORMAT, "outputs": kept}).encode()
    return len(data) <= _MAX_BYTES and write(home(environ), path, data)
