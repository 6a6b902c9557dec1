"""``superfluid serve --model PATH ...``: what a host runs.

See docs/host-contract.md, "1. Starting a server".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any

from superfluid import catalog
from superfluid.installer.home.hints import list_them
from superfluid.installer.home.installs import Verdict, current_install, judge, list_installs
from superfluid.installer.mutex import MutexBusy, MutexError, install_mutex
from superfluid.parser import COMMON_EXITS, Help, Once, OnceSwitch, Pair, Parser, exits
from superfluid.runtime import registry
from superfluid.runtime.contract import report_fixes
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel import formats
from superfluid.runtime.kernel.errors import NotServable, SuperfluidError, UsageError, WorkerFailed
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import (
    home,
    install_dir,
    install_lib,
    install_worker,
    installs_in,
    runtime_dir,
    worker_command,
)
from superfluid.runtime.kernel.record import verify_install
from superfluid.runtime.planning import parse_install_name
from superfluid.runtime.probe import install_cpu_fallback
from superfluid.serve_line import FLAGS, Ready, ServeCommand, ServeFlags, parse_line, runtime_argv, shown_options
from superfluid.supervise import serve_child

__all__ = ["HELP", "arguments", "run", "flags_of", "choose_runtime", "readiness", "check_of", "SESSIONS_LOCK"]

HELP = Help(
    "serve a model over an OpenAI-compatible HTTP API",
    "Serve one model: the runtime is --runtime's, else the one whose format the model is (.gguf: "
    "llamacpp, a baseRT model file: basert, an MLX directory: mlx); it must be installed and able to run "
    "here (the check of superfluid runtimes), then a worker process loads the model through ctypes and "
    "answers POST /v1/completions and /v1/chat/completions (streamed with stream: true), GET /v1/models, "
    "/health and /metrics (Prometheus text: decode steps by their sequences, busy and waiting requests). "
    "The whole line is checked first; each runtime option is spelled --<id>-<option> V. "
    "The startup line on stdout says what serves and from where; SIGTERM or SIGINT stops it and its "
    "worker. docs/host-contract.md is the contract for hosts.",
    ("superfluid serve --model tiny.gguf",
     "superfluid serve --model tiny.base --basert-lib ./build/libbaseRT.so --port 0",
     "superfluid serve --model m.gguf --runtime llamacpp@b11642-cpu --llamacpp-n-gpu-layers 0 --offline"),
    exits(_0="stopped cleanly by SIGTERM or SIGINT",
          _1="a run-time failure: the address cannot be bound, the worker failed",
          _2=COMMON_EXITS[2] + "; a model no runtime reads; --sessions held by another server",
          _3="the model did not load (the worker's reason)",
          _4="the runtime is not installed or cannot run here (its reason and the command that fixes it)"),
)

#: the lock file a server holds in its ``--sessions`` directory
SESSIONS_LOCK = ".superfluid-serve.lock"


def arguments(p: Parser) -> None:
    """serve's own flags, the runtime options the host contract names (``shown_options``) among them,
    and every other ``--<id>-<option>`` taken but listed below the page, with what each accepts."""
    p.takes_flags_only()
    shown = shown_options()
    for flag, (meta, what) in FLAGS.items():
        if meta is None:
            p.add_argument(flag, action=OnceSwitch, help=what)
        else:
            p.add_argument(flag, action=Once, metavar=meta, help=what)
    for flag, (meta, what) in shown.items():
        p.add_argument(flag, action=Pair, dest="runtime_options", metavar=meta, help=what)
    lines = ["runtime options (--<id>-<option> V, each checked against the runtime's declaration before anything "
             "starts):"]
    for rid in registry.IDS:
        for option in registry.get(rid).options():
            flag = f"--{rid}-{option.name}"
            if flag not in shown:
                p.add_argument(flag, action=Pair, dest="runtime_options", metavar="V", help=argparse.SUPPRESS)
            lines.append(f"  {flag} V".ljust(34) + f" {option.shape()}: {option.description}")
    p.epilog = HELP.epilog() + "\n\n" + "\n".join(lines)


def flags_of(args: argparse.Namespace) -> ServeFlags:
    """The serve line as the command tree parsed it, as ``parse_line`` takes it."""
    return ServeFlags(own={flag: getattr(args, flag[2:].replace("-", "_"), None) for flag in FLAGS},
                      unknown=tuple(getattr(args, "unknown", None) or ()),
                      runtime_options=tuple(getattr(args, "runtime_options", None) or ()))


def choose_runtime(line: ServeCommand) -> str:
    """``--runtime``, else the runtime whose declared format reads the model.

    Raises:
        UsageError: no runtime this release ships reads it (names the formats known).
    """
    if line.runtime is not None:
        return line.runtime
    declared = {rid: registry.get(rid).model_facts().formats for rid in registry.IDS}
    found = formats.claim(declared, formats.facts_of(line.model))
    if found is None:
        raise UsageError(f"no runtime reads the model {line.model}: {formats.describe(declared)}; name the runtime "
                         f"with --runtime ID")
    return found[0]


def _install_dir(runtime_id: str, install: str, environ: Mapping[str, str]) -> str:
    """The directory of ``--runtime ID@INSTALL``.

    Raises:
        NotServable: it is not installed (names the installs there are, and lists them; a name that
            says a version and a backend is installed by them).
    """
    root = runtime_dir(home(environ), runtime_id)
    path = install_dir(home(environ), runtime_id, install)
    if install in installs_in(root):
        return path
    have = ", ".join(installs_in(root)) or "none"
    found = [list_them(runtime_id)]
    named = parse_install_name(install)
    if named is not None:
        found.insert(0, Fix.superfluid("runtime", "install", runtime_id, "--version", named[0], "--backend", named[1],
                                       does=f"installs {install}"))
    raise NotServable(f"{runtime_id}@{install} is not installed (installs of {runtime_id} here: {have})", fix=found)


def _judged(runtime_id: str, install: str | None, environ: Mapping[str, str]) -> Verdict | None:
    """The verdict (``installs.judge``, as every command says it) of the install served from:
    ``--runtime ID@INSTALL``'s, else the one ``current`` names; None when there is none, or when
    the glance called it changed and every byte hashes as its receipt records it."""
    root = runtime_dir(home(environ), runtime_id)
    name = install or current_install(root)
    found = list_installs(root) if name else []
    there = next((i for i in found if i.name == name), None)
    if there is None:
        return None
    verdict = judge(runtime_id, there, found, serving=name, platform=host_platform(environ))
    if verdict.state == "changed" and there.receipt is not None:
        # a glance cannot tell a copied home (new inodes) from a file rewritten in place: serve, about
        # to load the engine anyway, hashes it as runtime verify does; every byte as recorded is served
        # (its stat facts recorded where the home is writable, so the glance says ready from then on)
        if verify_install(runtime_id, there.name, there.path, there.receipt, record=True).ok:
            return None
    return verdict


def _refuse(runtime_id: str, verdict: Verdict | None, *, untested: bool) -> None:
    """Refuse to serve from an install the verdict calls changed or broken (and, ``untested``, one
    this superfluid does not drive whose check failed).

    Raises:
        NotServable: naming what it is, why, and what fixes it (the repair, not "install it").
    """
    if verdict is not None and (verdict.refused or (untested and verdict.state == "untested")):
        raise NotServable(f"{runtime_id} {verdict.words()}; it is not served", fix=verdict.fixes,
                          advice=verdict.advice)


def readiness(runtime_id: str, line: ServeCommand, environ: Mapping[str, str]) -> Ready:
    """Whether ``runtime_id`` can serve here: its worker, the verdict of the install it serves from
    (``installs.judge``: not changed or broken) and, where its answer decides something before the
    worker starts (``_check_first``), the check the face runs for ``superfluid runtimes``. Otherwise
    the report is None: the worker starts at once, its own start loads and judges the library as the
    check would, and the check is asked only to say why it failed (``check_of``).

    Raises:
        NotServable: not installed, or unable to run here (the check's reason and fix); the install
            it would serve from changed or broken (the repair, not "install it"), even when its check
            passes; an untested one whose check fails (the install it drives).
    """
    home_lib = "lib" not in line.options.get(runtime_id, {})  # a library the line names is not the home's
    verdict = _judged(runtime_id, line.install, environ) if home_lib else None
    try:
        worker, values, install = _worker(runtime_id, line, environ)
        first = _check_first(runtime_id, verdict, _served_install(runtime_id, install, values, environ))
        report = _asked(runtime_id, values, environ) if first else None
    except NotServable:
        _refuse(runtime_id, verdict, untested=bool(line.install or not environ.get(registry.env_override(runtime_id))))
        raise
    if report is None or line.install or not report.get("named"):  # nor one its variable names
        _refuse(runtime_id, verdict, untested=False)
    return Ready(runtime_id, worker, report, values, install)


#: a check's report that lists no device: the builds ``probe.cpu_fallback`` says serve on the CPU with it are
#: the GPU builds, whose check must be asked to know
_NO_DEVICE: Mapping[str, Any] = {"devices": []}


def _check_first(runtime_id: str, verdict: Verdict | None, served: str | None) -> bool:
    """Whether the check is asked before the worker starts: a linked adapter's (answered in process,
    as cheap as deciding); one whose install's verdict is not ready (changed or broken: refused unless
    the runtime's variable names the library; untested: refused when its check fails; for another
    host); a GPU build's (``served``: only its check's devices say whether it serves on the CPU, and
    that is said before it serves). Otherwise the worker's own start answers what the check would,
    without a process of its own before it (issue 45: a check worker and the validation of its
    answer were 130 ms of a 425 ms cold start)."""
    if registry.get(runtime_id).linked or (verdict is not None and not verdict.ready):
        return True
    return served is not None and install_cpu_fallback(served, _NO_DEVICE) is not None


def _served_install(runtime_id: str, install: str | None, values: Mapping[str, Any],
                    environ: Mapping[str, str]) -> str | None:
    """The install directory served from, as far as the line tells: ``--runtime ID@INSTALL``'s, else
    the one ``current`` names unless the line names a library; None for neither. (A library the
    runtime's variable names is not the install's either: only its check says so.)"""
    if install is not None or "lib" in values:
        return install
    name = current_install(runtime_dir(home(environ), runtime_id))
    return None if name is None else install_dir(home(environ), runtime_id, name)


def _worker(runtime_id: str, line: ServeCommand, environ: Mapping[str, str]) -> tuple[str, dict[str, Any], str | None]:
    """The worker that serves, the runtime's option values it gets (an install's library as its
    ``lib``) and ``--runtime ID@INSTALL``'s directory.

    Raises:
        NotServable: no worker, the install is not there, or nothing to load (decided in process, from
            the lookups the check would make: no worker starts).
    """
    adapter = registry.get(runtime_id)
    values = dict(line.options.get(runtime_id, {}))
    install = _install_dir(runtime_id, line.install, environ) if line.install else None
    takes_lib = any(o.name == "lib" for o in adapter.options())
    if install is not None and takes_lib and "lib" not in values:
        values["lib"] = install_lib(install)
    if install is not None and not environ.get(registry.env_override(runtime_id)):
        ref: catalog.WorkerRef | None = catalog.WorkerRef(install_worker(install, runtime_id), "installed")
    else:
        ref = catalog.locate(runtime_id, environ, serving=True)
    if ref is None or not os.access(ref.path, os.X_OK):
        raise NotServable(f"no {worker_command(runtime_id)} to serve with (looked in "
                          f"{', '.join(catalog.shipped_dirs())})", advice="reinstall superfluid")
    if "lib" not in values and install is None:
        nothing = catalog.nothing_to_load(runtime_id, catalog.locate(runtime_id, environ), environ)
        if nothing is not None:
            # its check's own words and fixes, and no worker started
            raise NotServable(nothing.message, fix=nothing.fixes, advice=nothing.advice)
    return ref.path, values, install


def _asked(runtime_id: str, values: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The runtime's check with the line's options (``catalog.answer``: a kept answer, else its worker
    or the adapter in process), as ``superfluid runtimes`` asks it.

    Raises:
        NotServable: it is not ``available`` (its words, advice and fixes), or its worker failed.
    """
    try:
        report, _, _ = catalog.answer(runtime_id, ["check", *runtime_argv(runtime_id, values)], environ)
    except WorkerFailed as e:
        raise NotServable(f"the {runtime_id} runtime cannot run here: {e}") from e
    available = report.get("available") if isinstance(report, dict) else None
    if available is not True:  # its words and advice; its commands as the values it carries
        said = str(available or f"the {runtime_id} check said nothing about availability")
        refused = report.get("refused") if isinstance(report, dict) else None
        advice = said[len(refused) + 2:] if isinstance(refused, str) and said.startswith(f"{refused}: ") else None
        raise NotServable(refused if isinstance(refused, str) and advice else said, fix=report_fixes(report),
                          advice=advice)
    return dict(report)


def check_of(ready: Ready, environ: Mapping[str, str]) -> Callable[[], Mapping[str, Any]]:
    """The check's report as the supervisor asks it (``serve_child``): the one ``readiness`` asked, else
    asked now (why the worker failed to start; who named the library it announced).

    The function raises ``NotServable`` when the check refuses (its words and fixes)."""
    if ready.report is not None:
        return partial(dict, ready.report)
    return partial(_asked, ready.runtime_id, ready.values, environ)


def _cpu_fallback(ready: Ready, environ: Mapping[str, str]) -> str | None:
    """Why the install served from, a GPU build by its receipt, serves on the CPU (its check finds no
    device of its family: ``probe.cpu_fallback``), or None; a library the line or the runtime's
    variable names is no install's, and is not judged. No report: no GPU build is served
    (``_check_first``)."""
    if ready.report is None or (ready.install is None and ready.report.get("named")):
        return None
    path = _served_install(ready.runtime_id, ready.install, ready.values, environ)
    return None if path is None else install_cpu_fallback(path, ready.report)


def run(args: argparse.Namespace) -> int:
    """``superfluid serve ...``; the exit code (errors are raised for the face's table).

    Raises:
        UsageError: a bad line, a model no runtime reads, ``--sessions`` held (exit 2).
        NotServable: the runtime is not installed or cannot run here (exit 4).
        ModelLoadFailed: the worker could not load the model (exit 3).
        SuperfluidError: the worker failed otherwise (exit 1).
    """
    env = dict(os.environ)
    line = parse_line(flags_of(args))
    runtime_id = choose_runtime(line)
    with _hold_sessions(line.sessions):
        ready = readiness(runtime_id, line, env)
        if (cpu := _cpu_fallback(ready, env)) is not None:  # a GPU build serving on the CPU is said, never silent
            sys.stderr.write(f"superfluid serve: {cpu}\n")
        return serve_child(ready, line, env, check_of(ready, env), getattr(args, "ahead", None),
                           getattr(args, "started", None))


@contextmanager
def _hold_sessions(directory: str | None) -> Iterator[None]:
    """Hold ``--sessions DIR`` for the block (nothing without one).

    Raises:
        UsageError: another server holds it (names its pid).
        SuperfluidError: the directory or its lock file cannot be made.
    """
    if directory is None:
        yield
        return
    with ExitStack() as stack:
        try:
            stack.enter_context(install_mutex(directory, timeout=0, name=SESSIONS_LOCK, command="superfluid serve"))
        except MutexBusy as e:
            pid = e.holder.pid
            raise UsageError(f"--sessions {directory} is held by another server ({e.holder.describe()}): one "
                             f"server per sessions directory",
                             advice=f"stop it (kill {pid}) or give another --sessions" if pid else
                             "stop it or give another --sessions") from None
        except MutexError as e:
            raise SuperfluidError(f"--sessions {directory}: {e.message}") from None
        yield
