"""Where the face finds each runtime's worker, and how it asks one.

See docs/cli.md, "Runtime ids and where their workers are found".
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid import __version__
from superfluid import runtime as _runtime_pkg
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError, WorkerFailed
from superfluid.runtime.kernel.fixes import ENV_LOG
from superfluid.runtime.kernel.home_cache import dependency, read_object, unchanged, write
from superfluid.runtime.kernel.layout import (
    cache_file,
    current_dir,
    current_target,
    current_worker,
    home,
    install_receipt,
    installed_installs,
    runtime_dir,
    shipped_dirs,
    worker_command,
)
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.options import options_json
from superfluid.runtime.kernel.schema import validate_once
from superfluid.runtime.process import DEFAULT_TIMEOUT, run_json, scrubbed_env, worker_env

__all__ = ["ENV_KEYS", "env_keys", "WorkerRef", "locate", "ask", "answer", "nothing_to_load", "shipped_dirs",
           "worker_timeout"]

#: what every adapter answers in process, from its recipe and code (SPEC §2)
_DECLARATIONS = ("compat", "versions", "options")

#: environment every worker's answer may depend on (besides SUPERFLUID_* and SUPERFLUID_HOST_*; each
#: runtime's own variables are its adapter's ``environment``: ``env_keys``)
ENV_KEYS = ("VIRTUAL_ENV", "PATH", "LD_LIBRARY_PATH")
_CACHE_VERSION = 3
#: bytes of the answer cache read (64 answers of a few KiB each)
_CACHE_MAX_BYTES = 4 << 20
#: seconds a worker that hung or could not start is not asked again (one timeout, not one per question)
FAILURE_TTL = 60.0
#: what a worker's answer to each command is, checked before it is used: ``check`` against its
#: schema (once per content), the declarations for their kind here and for their shape by
#: ``superfluid.declarations`` (by hand: that path is asked on every run)
_ANSWER_SCHEMAS = {"check": "check"}
_ANSWER_KINDS: dict[str, type] = {"versions": list, "options": list, "compat": dict}


@dataclass(frozen=True, slots=True)
class WorkerRef:
    """A located worker: its command path and where it came from."""

    path: str
    source: str  # "environment" | "installed" | "beside superfluid"

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "source": self.source}


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def locate(runtime_id: str, environ: Mapping[str, str], *, serving: bool = False) -> WorkerRef | None:
    """The worker to ask for ``runtime_id``'s ``check`` (None: the linked adapter checks in
    process, or there is none); the one named by ``SUPERFLUID_WORKER_<ID>`` for every command.
    ``serving``: the worker that serves, which a linked adapter has like any other."""
    named = environ.get(registry.env_override(runtime_id))
    if named:
        return WorkerRef(named, "environment")
    if registry.get(runtime_id).linked and not serving:
        return None
    name = worker_command(runtime_id)
    installed = current_worker(home(environ), runtime_id)
    # only through a good `current` (a link to an install of this runtime): never run from out of the home
    if current_target(runtime_dir(home(environ), runtime_id))[0] is not None and _executable(installed):
        return WorkerRef(installed, "installed")
    for d in shipped_dirs():
        candidate = os.path.join(d, name)
        if _executable(candidate):
            return WorkerRef(candidate, "beside superfluid")
    return None


def _steering(environ: Mapping[str, str], keys: Sequence[str]) -> list[tuple[str, str]]:
    """The variables a kept answer is keyed by: ``SUPERFLUID_*`` (not the file the suite's hint report is
    written to, new for every run) and ``keys``."""
    return sorted((k, v) for k, v in environ.items() if (k.startswith("SUPERFLUID_") and k != ENV_LOG) or k in keys)


def env_keys(runtime_id: str) -> tuple[str, ...]:
    """The variables (besides ``SUPERFLUID_*``) a worker's answer for ``runtime_id`` may depend on."""
    return (*ENV_KEYS, *registry.get(runtime_id).environment)


def _key(ref: WorkerRef, argv: Sequence[str], runtime_id: str, environ: Mapping[str, str]) -> str:
    root = runtime_dir(home(environ), runtime_id)
    current = current_dir(home(environ), runtime_id)
    try:
        target = os.readlink(current)
    except OSError:
        target = None
    keys = env_keys(runtime_id)
    env = _steering(environ, keys)
    recipe = os.path.join(os.path.dirname(_runtime_pkg.__file__ or ""), runtime_id, "recipe.json")
    facts = [_CACHE_VERSION, __version__, dependency(recipe), ref.path, dependency(ref.path), list(argv), env, target,
             dependency(install_receipt(current)), dependency(root)]
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _cache_path(environ: Mapping[str, str]) -> str:
    return cache_file(home(environ), "answers.json")


def _still_valid(entry: dict[str, Any]) -> bool:
    """An answer that named a library stays valid only while that file is unchanged."""
    deps = entry.get("deps") or []
    return isinstance(deps, list) and unchanged(deps)


def _store(path: str, cache: dict[str, Any]) -> None:
    """Write the answer cache (not through a link out of the home: a cache only saves time)."""
    write(os.path.dirname(os.path.dirname(path)), path, json.dumps(cache).encode())


def _trimmed(entries: dict[str, Any]) -> dict[str, Any]:
    return dict(list(entries.items())[-64:]) if len(entries) > 64 else entries


def _failure_key(ref: WorkerRef, runtime_id: str, environ: Mapping[str, str]) -> str:
    """One worker file (as it is now) in one environment: what a remembered failure is of."""
    keys = env_keys(runtime_id)
    env = _steering(environ, keys)
    facts = ["failed", _CACHE_VERSION, ref.path, dependency(ref.path), env]
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def _remembered_failure(entry: Any, ref: WorkerRef) -> None:
    """Raise the failure of ``ref`` remembered less than ``FAILURE_TTL`` seconds ago, if any."""
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), (int, float)):
        return
    age = time.time() - float(entry["at"])
    if 0 <= age < FAILURE_TTL:
        reason = str(entry.get("failed") or "failed")[:300]
        raise WorkerFailed(os.path.basename(ref.path), f"{reason} ({age:.0f} s ago; not asked again for "
                                                      f"{FAILURE_TTL:g} s after a failure)")


def _checked(answer: Any, argv: Sequence[str], ref: WorkerRef) -> Any:
    """``answer`` when it is what its command answers (its schema in ``schemas/``), else the
    worker failed: a wrong answer is never used, whatever its shape.

    Raises:
        WorkerFailed: the answer does not match its schema (names the JSON path at fault).
    """
    command = argv[0] if argv else ""
    name = _ANSWER_SCHEMAS.get(command)
    if name is None:
        kind = _ANSWER_KINDS.get(command, (dict, list))
        if not isinstance(answer, kind):
            raise WorkerFailed(os.path.basename(ref.path), f"answered `{command}` with a JSON "
                                                          f"{type(answer).__name__}, not what it answers")
        return answer
    try:
        validate_once(answer, json.dumps(answer, sort_keys=True).encode(), name, f"its {argv[0]} answer")
    except BadFile as e:
        raise WorkerFailed(os.path.basename(ref.path), e.message) from None
    return answer


def worker_timeout(environ: Mapping[str, str]) -> float:
    """Seconds a worker may take: ``SUPERFLUID_WORKER_TIMEOUT`` when a positive number, else the default."""
    try:
        value = float(environ.get("SUPERFLUID_WORKER_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def ask(ref: WorkerRef, argv: Sequence[str], runtime_id: str, environ: Mapping[str, str], *,
        accept: Sequence[int] = (0, 1), cache: bool = True) -> tuple[Any, int]:
    """Run ``<worker> <argv...>`` and parse its one line of JSON; (answer, exit code).

    Only ``check`` answers are cached (with llamacpp installed, runtimes --json computed is 4.18x a
    bare start with them, 8.11x asking its worker each time; bench_cli); a named worker's declarations
    are asked each time.

    Raises:
        WorkerFailed: the worker could not start, hung, or did not answer with JSON.
    """
    cache = cache and argv[:1] == ["check"]
    path = _cache_path(environ)
    key = _key(ref, argv, runtime_id, environ)
    entries = read_object(path, max_bytes=_CACHE_MAX_BYTES)
    hit = entries.get(key) if cache else None
    if isinstance(hit, dict) and _still_valid(hit) and isinstance(hit.get("code"), int):
        try:
            return _checked(hit.get("answer"), argv, ref), int(hit["code"])
        except WorkerFailed:
            pass  # a cache entry that is not an answer: asked again
    failed_key = _failure_key(ref, runtime_id, environ)
    _remembered_failure(entries.get(failed_key), ref)
    try:
        answer, result = run_json([ref.path, *argv], env=worker_env(environ), accept=accept,
                                  timeout=worker_timeout(environ))
    except WorkerFailed as e:
        if e.lasting:
            entries[failed_key] = {"failed": e.reason, "at": time.time()}
            _store(path, _trimmed(entries))
        raise
    answer = _checked(answer, argv, ref)
    if entries.pop(failed_key, None) is not None and not cache:
        _store(path, entries)
    if cache:
        library = answer.get("library") if isinstance(answer, dict) else None
        deps = [dependency(library)] if isinstance(library, str) else []
        # a verdict on a model stands while the model is as it was (a file fixed in place is judged again)
        deps += [dependency(argv[i + 1]) for i, flag in enumerate(argv[:-1]) if flag == "--model"]
        entries = {k: v for k, v in entries.items() if k != key}
        entries[key] = {"answer": answer, "code": result.returncode, "deps": deps}
        _store(path, _trimmed(entries))
    return answer, result.returncode


def _in_process(runtime_id: str, argv: Sequence[str], environ: Mapping[str, str]) -> tuple[Any, int]:
    adapter = registry.get(runtime_id)
    command = argv[0]
    if command == "check":
        return adapter.check(list(argv[1:]), read(environ))
    if command == "compat":
        return adapter.compat(), 0
    if command == "versions":
        return adapter.versions(detect(environ), installed_installs(runtime_id, home(environ))), 0
    if command == "options":
        return options_json(adapter.options()), 0
    raise ValueError(f"no in-process answer for {command!r}")


def answer(runtime_id: str, argv: Sequence[str], environ: Mapping[str, str], *,
           accept: Sequence[int] = (0, 1)) -> tuple[Any, int, WorkerRef | None]:
    """Ask a runtime: its named worker, else the adapter in process (the declarations, and a
    linked adapter's ``check``), else its worker (any other ``check``).

    ``argv`` is a worker command line (``["check"]``, ``["versions", "--json"]``...). Returns the
    parsed answer, the exit code and the worker asked (None when answered in process).

    Raises:
        WorkerFailed: no worker was found, or it failed, hung or did not answer with JSON.
    """
    ref = locate(runtime_id, environ)
    if ref is None or ref.source != "environment":
        if argv[0] in _DECLARATIONS or registry.get(runtime_id).linked:
            got, code = _in_process(runtime_id, argv, environ)
            return got, code, None
    if ref is None:
        looked = ", ".join(shipped_dirs())
        raise WorkerFailed(worker_command(runtime_id),
                           f"not found (looked in {looked}; set {registry.env_override(runtime_id)} "
                           f"or reinstall superfluid)")
    got, code = ask(ref, argv, runtime_id, environ, accept=accept)
    return got, code, ref


def nothing_to_load(runtime_id: str, ref: WorkerRef | None, environ: Mapping[str, str]) -> SuperfluidError | None:
    """Why ``ref``'s plain ``check`` would find nothing here to load, decided in process from the
    lookups it would make, so that no worker starts for a runtime that is not installed.

    None when only the worker can tell: it is named by ``SUPERFLUID_WORKER_<ID>`` (asked first, for
    everything), the check is linked (in process anyway), or there is something to load.
    """
    if ref is None or ref.source == "environment":
        return None
    # the environment the worker would get (SPEC §8.4), so both look in the same places
    return registry.get(runtime_id).nothing_to_load(read(scrubbed_env(environ)), ref.path)
