"""A read-only command's whole output, kept while nothing it was computed from has changed."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from superfluid import __version__
from superfluid.runtime import registry
from superfluid.runtime.home import cache_file, home, runtimes_dir
from superfluid.runtime.home_cache import changed_at, fingerprint, read_object

__all__ = ["KEPT_COMMANDS", "KEEP_SECONDS", "RACY_SECONDS", "lookup", "keep", "depends_on"]

#: the commands whose output may be kept (the first word of the command line)
KEPT_COMMANDS = frozenset({"runtimes"})
#: seconds a kept output is printed again at most (a bound on what no stat sees: a GPU plugged in)
KEEP_SECONDS = 300.0
#: a path changed this close before the computation began (or later) keeps nothing: file times are
#: coarser than the clock (a tick of the kernel), so a change during it may carry an earlier time
RACY_SECONDS = 0.2
_FORMAT = 1
_FILE = "outputs.json"
#: command lines kept at once (``runtimes``, ``runtimes --json``... the newest last)
_MAX_ENTRIES = 8
_MAX_BYTES = 1 << 20
#: the shell's bookkeeping, not the command's input (the working directory is taken as such)
_SHELL_VARS = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})
#: how deep the home's runtimes folder is recorded: runtimes/<id>/<install>/<folder>/<file>
_HOME_DEPTH = 4


def _path(environ: Mapping[str, str]) -> str:
    return cache_file(home(environ), _FILE)


def _inputs(argv: Sequence[str], environ: Mapping[str, str]) -> list[Any]:
    """What the output is a function of besides the files: command line, version, interpreter,
    working directory, environment."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    env = sorted([k, v] for k, v in environ.items() if k not in _SHELL_VARS)
    return [_FORMAT, __version__, list(argv), sys.executable, sys.argv[0] if sys.argv else "", cwd, env]


def _kept_here(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether ``superfluid <argv>`` may be answered from, or into, the kept outputs: a kept
    command, and no worker named (``registry.env_override``, empty meaning unset as for the catalog)."""
    return bool(argv) and argv[0] in KEPT_COMMANDS and not any(
        environ.get(registry.env_override(runtime_id)) for runtime_id in registry.IDS)


def lookup(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The kept output of ``superfluid <argv>`` when nothing it was computed from has changed, else None."""
    if not _kept_here(argv, environ):
        return None
    entry = read_object(_path(environ), max_bytes=_MAX_BYTES).get(" ".join(argv))
    if not isinstance(entry, dict) or not isinstance(entry.get("output"), str):
        return None
    at, deps = entry.get("at"), entry.get("deps")
    if not isinstance(at, (int, float)) or not 0 <= time.time() - at < KEEP_SECONDS or not isinstance(deps, list):
        return None
    if entry.get("inputs") != _inputs(argv, environ):
        return None
    for dep in deps:
        if not isinstance(dep, list) or len(dep) != 2 or not isinstance(dep[0], str) or fingerprint(dep[0]) != dep[1]:
            return None
    output: str = entry["output"]
    return output


def _entries(folder: str, depth: int) -> Iterator[str]:
    """``folder`` and what is in it to ``depth`` levels, links not followed."""
    yield folder
    if depth == 0:
        return
    try:
        with os.scandir(folder) as it:
            found = [(e.path, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return
    for path, is_dir in sorted(found):
        if is_dir:
            yield from _entries(path, depth - 1)
        else:
            yield path


def depends_on(environ: Mapping[str, str]) -> list[str]:
    """The paths an answer about the runtimes here depends on (see the module's docstring)."""
    from superfluid.catalog import env_keys, shipped_dirs
    from superfluid.runtime.host import PROBED
    from superfluid.runtime.locate import beside

    paths: list[str] = [*_entries(runtimes_dir(home(environ)), _HOME_DEPTH)]
    for folder in shipped_dirs():  # workers beside superfluid, and the libraries searched there
        for searched in beside(folder):
            paths += _entries(searched, 1)
    keys = {k for runtime_id in registry.IDS for k in env_keys(runtime_id)}
    for key, value in environ.items():  # the home itself is not: its runtimes are, its cache is not
        if (key in keys or key.startswith("SUPERFLUID_")) and key != "SUPERFLUID_HOME":
            paths += [p for p in value.split(os.pathsep) if os.path.isabs(p)]
    paths += [*PROBED, sys.executable]
    files = [getattr(m, "__file__", None) for name, m in list(sys.modules.items())
             if name.split(".")[0] == "superfluid"]
    folders = {os.path.dirname(f) for f in files if isinstance(f, str)}
    for folder in sorted(folders):
        paths += _entries(folder, 1)
    # byte code is written as modules are first imported: what it is compiled from is recorded instead
    return [p for p in dict.fromkeys(paths) if not p.endswith((".pyc", "__pycache__"))]


def keep(argv: Sequence[str], environ: Mapping[str, str], output: str, *, began: float,
         deps: Iterable[str] | None = None) -> bool:
    """Keep ``output`` of ``superfluid <argv>``, computed from ``began`` (a ``time.time()``) on;
    ``deps`` default ``depends_on(environ)``. Answers whether it was kept: never for a command not
    in ``KEPT_COMMANDS``, while a worker is named, after a racy change, or where the home's cache
    cannot be written (or is a link out of it: nothing is written through one)."""
    from superfluid.runtime.home_cache import write

    if not _kept_here(argv, environ):
        return False
    stats = [(p, fingerprint(p)) for p in (depends_on(environ) if deps is None else deps)]
    if any(changed_at(facts) >= (began - RACY_SECONDS) * 1e9 for _, facts in stats):
        return False
    path = _path(environ)
    kept = read_object(path, max_bytes=_MAX_BYTES)
    kept.pop(" ".join(argv), None)
    kept = dict(list(kept.items())[-(_MAX_ENTRIES - 1):])
    kept[" ".join(argv)] = {"at": began, "inputs": _inputs(argv, environ),
                            "deps": [[p, facts] for p, facts in stats], "output": output}
    import json

    data = json.dumps(kept).encode()
    return len(data) <= _MAX_BYTES and write(home(environ), path, data)
