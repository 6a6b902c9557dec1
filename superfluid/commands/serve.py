"""``superfluid serve --model PATH ...``: what a host runs.

See docs/host-contract.md, "1. Starting a server".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from superfluid.runtime.errors import NotServable, SuperfluidError, UsageError

__all__ = ["ServeCommand", "Ready", "FLAGS", "shown_options", "add_flags", "parse_line", "choose_runtime", "readiness",
           "runtime_argv", "main", "usage", "SESSIONS_LOCK"]

#: the lock file a server holds in its ``--sessions`` directory
SESSIONS_LOCK = ".superfluid-serve.lock"
#: serve's own flags: flag -> (its value's name, or None for a switch; what it does)
FLAGS: dict[str, tuple[str | None, str]] = {
    "--model": ("PATH", "the model: a GGUF file (llamacpp), a baseRT model file (basert), an MLX directory (mlx)"),
    "--runtime": ("ID[@INSTALL]", "serve with this runtime (default: the one whose format the model is), from "
                                  "this install under $SUPERFLUID_HOME/runtimes/ID (default: the current one)"),
    "--offline": (None, "install and fetch nothing (serve never does; for hosts that pass it to every command)"),
    "--sessions": ("DIR", "a directory this server holds alone while it runs (a second server on it exits 2)"),
    "--host": ("H", "the address to listen on (default 127.0.0.1)"),
    "--port": ("N", "the port (default 8080; 0 picks a free one, which the startup line names)"),
    "--max-context": ("N", "tokens one generation may hold, prompt included (default: the model's, at most 4096)"),
    "--queue": ("N", "requests that may wait while one generates (default 16); more are answered 503"),
}
_VALUED = {flag: meta for flag, (meta, _) in FLAGS.items() if meta is not None}
_SWITCHES = tuple(flag for flag, (meta, _) in FLAGS.items() if meta is None)
_HELP = "see 'superfluid serve --help'"


def shown_options() -> dict[str, tuple[str, str]]:
    """The runtime options shown among serve's flags, ``--<id>-<option>`` -> (its value's name, what it
    does): each adapter's ``serve_flags`` (every ``--<id>-<option>`` is taken; these the host contract
    names)."""
    from superfluid.runtime import registry

    return {f"--{rid}-{f.option}": (f.metavar, f.words) for rid in registry.IDS for f in registry.get(rid).serve_flags}


def add_flags(parser: argparse.ArgumentParser, *, shown: bool = True) -> None:
    """Declare serve's flags on ``parser`` (its help page, completion and the hint checks read them;
    the line itself is read by ``parse_line``, since each ``--<id>-<option>`` is an adapter's), and with
    ``shown`` the runtime options shown among them (every adapter is imported)."""
    for flag, (meta, what) in {**FLAGS, **(shown_options() if shown else {})}.items():
        if meta is None:
            parser.add_argument(flag, action="store_true", help=what)
        else:
            parser.add_argument(flag, metavar=meta, help=what)


@dataclass(frozen=True, slots=True)
class ServeCommand:
    """A checked ``serve`` command line."""

    model: str
    runtime: str | None = None
    install: str | None = None
    offline: bool = False
    sessions: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    max_context: int | None = None
    queue: int = 16
    #: runtime id -> its checked option values (only the runtimes named by a flag)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)


def _known(flag: str, ids: Sequence[str]) -> bool:
    return flag in _VALUED or flag in _SWITCHES or any(flag.startswith(f"--{i}-") for i in ids)


def _tokens(argv: Sequence[str], ids: Sequence[str]) -> tuple[dict[str, str], set[str], list[tuple[str, str]]]:
    """``(own flags with values, switches given, --<id>-<option> pairs)``, each flag at most once.

    Raises:
        UsageError: a stray argument, an unknown flag, a flag without its value (or a switch with
            one), a flag given twice.
    """
    own: dict[str, str] = {}
    switches: set[str] = set()
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    rest = list(argv)
    while rest:
        token = rest.pop(0)
        if not token.startswith("--") or token == "--":
            raise UsageError(f"unexpected argument {token!r}: serve takes flags only ({_HELP})")
        flag, eq, value = token.partition("=")
        if not _known(flag, ids):
            raise UsageError(f"unknown flag {flag}: not a serve flag, nor --<runtime>-<option> of a runtime this "
                             f"superfluid ships ({', '.join(ids)}) ({_HELP})")
        if flag in seen:
            raise UsageError(f"{flag} is given twice")
        seen.add(flag)
        if flag in _SWITCHES:
            if eq:
                raise UsageError(f"{flag} takes no value")
            switches.add(flag)
            continue
        if not eq:
            if not rest:
                raise UsageError(f"{flag} needs a value")
            value = rest.pop(0)
        if flag in _VALUED:
            if not value:
                raise UsageError(f"{flag} needs a value")
            own[flag] = value
        else:
            pairs.append((flag[2:], value))
    return own, switches, pairs


def _runtime_flag(value: str | None) -> tuple[str | None, str | None]:
    """``--runtime ID[@INSTALL]`` checked: the id names a runtime this release ships, the install
    is an install name.

    Raises:
        UsageError: either is not.
    """
    if value is None:
        return None, None
    from superfluid.runtime import registry

    runtime_id, at, install = value.partition("@")
    runtime_id = registry.canonical(runtime_id)  # llama.cpp is llamacpp
    registry.get(runtime_id)
    if not at:
        return runtime_id, None
    from superfluid.installer.home.store import check_install_name

    if not install:
        raise UsageError(f"--runtime {value!r}: name the install after '@' (e.g. {runtime_id}@0.4.0-cpu)")
    return runtime_id, check_install_name(install)


def parse_line(argv: Sequence[str]) -> ServeCommand:
    """The serve line, every value checked (nothing is looked up but the model path).

    Raises:
        UsageError: no ``--model``, a model path that names nothing, an unknown flag, a bad value of
            a serve flag, an option a runtime does not declare or a value of the wrong shape.
    """
    from superfluid.optionflags import check_runtime_options, split_serve_options
    from superfluid.runtime import registry
    from superfluid.runtime.serving import listen_flags, max_context_flag, queue_flag

    own, switches, pairs = _tokens(argv, registry.IDS)
    host, port = listen_flags(own)
    runtime, install = _runtime_flag(own.get("--runtime"))
    options = {rid: check_runtime_options(rid, given, prefix=f"{rid}-")
               for rid, given in split_serve_options(pairs, registry.IDS).items()}
    max_context, queue = max_context_flag(own), queue_flag(own)
    model = own.get("--model")
    if model is None:
        raise UsageError(f"serve needs --model PATH ({_HELP})")
    from superfluid.paths import model_path

    model_path("--model", model, runtime)  # a FIFO or a device would hold the format probe forever
    sessions = own.get("--sessions")
    if sessions is not None and os.path.exists(sessions) and not os.path.isdir(sessions):
        raise UsageError(f"--sessions {sessions}: not a directory")
    return ServeCommand(model=os.path.abspath(model), runtime=runtime, install=install, offline="--offline" in switches,
                        sessions=sessions, host=host, port=port, max_context=max_context, queue=queue, options=options)


def choose_runtime(line: ServeCommand) -> str:
    """``--runtime``, else the runtime whose declared format reads the model.

    Raises:
        UsageError: no runtime this release ships reads it (names the formats known).
    """
    if line.runtime is not None:
        return line.runtime
    from superfluid.runtime import formats, registry

    declared = {rid: registry.get(rid).formats() for rid in registry.IDS}
    found = formats.claim(declared, formats.facts_of(line.model))
    if found is None:
        raise UsageError(f"no runtime reads the model {line.model}: {formats.describe(declared)}; name the runtime "
                         f"with --runtime ID")
    return found[0]


def runtime_argv(runtime_id: str, values: Mapping[str, Any]) -> list[str]:
    """Checked option values as the worker reads them, the library flag spelled as on serve
    (``--basert-lib P``: every worker takes it, and its report's ``named`` then says that flag)."""
    from superfluid.optionflags import worker_argv

    argv = worker_argv({n: v for n, v in values.items() if n != "lib"})
    return argv + ([f"--{runtime_id}-lib", str(values["lib"])] if "lib" in values else [])


@dataclass(frozen=True, slots=True)
class Ready:
    """A runtime found able to serve: the worker that serves, its check and the options it gets."""

    runtime_id: str
    worker: str
    report: dict[str, Any]
    values: dict[str, Any]
    install: str | None  # the install directory named by --runtime ID@INSTALL


def _install_dir(runtime_id: str, install: str, environ: Mapping[str, str]) -> str:
    """The directory of ``--runtime ID@INSTALL``.

    Raises:
        NotServable: it is not installed (names the installs there are).
    """
    from superfluid.runtime.home import home, install_dir, installs_in, runtime_dir
    from superfluid.runtime.planning import parse_install_name

    root = runtime_dir(home(environ), runtime_id)
    path = install_dir(home(environ), runtime_id, install)
    if install in installs_in(root):
        return path
    have = ", ".join(installs_in(root)) or "none"
    version = (parse_install_name(install) or (install, ""))[0]
    raise NotServable(f"{runtime_id}@{install} is not installed (installs of {runtime_id} here: {have})",
                      fix=f"install it with `superfluid runtime install {runtime_id} --version "
                          f"{version}`, or name an install that exists")


def _whole(runtime_id: str, install: str | None, environ: Mapping[str, str]) -> None:
    """Refuse to serve from an install that is broken (``--runtime ID@INSTALL``'s, else the one
    ``current`` names): its receipt does not read, or a file it records is gone.

    Raises:
        NotServable: it is broken (names what, and the repair that puts it back).
    """
    from superfluid.installer.home.store import current_install, fault, list_installs
    from superfluid.runtime.home import home, runtime_dir
    from superfluid.runtime.upkeep import puts_back

    root = runtime_dir(home(environ), runtime_id)
    name = install or current_install(root)
    found = next((i for i in list_installs(root) if i.name == name), None) if name else None
    why = fault(found) if found is not None else None
    if found is not None and why is not None:
        raise NotServable(f"{runtime_id} {name} is broken ({why}); it is not served",
                          fix=puts_back(runtime_id, found.name))


def readiness(runtime_id: str, line: ServeCommand, environ: Mapping[str, str]) -> Ready:
    """Whether ``runtime_id`` can serve here: the check the face runs for ``superfluid runtimes``.

    Raises:
        NotServable: not installed, or unable to run here (the check's reason and fix); the install
            it would serve from broken (``_whole``: the repair, not "install it").
    """
    try:
        return _readiness(runtime_id, line, environ)
    except NotServable:
        if "lib" not in line.options.get(runtime_id, {}):  # a library the line names is not the home's
            _whole(runtime_id, line.install, environ)
        raise


def _readiness(runtime_id: str, line: ServeCommand, environ: Mapping[str, str]) -> Ready:
    from superfluid import catalog
    from superfluid.runtime import registry
    from superfluid.runtime.errors import WorkerFailed
    from superfluid.runtime.home import install_lib, install_worker

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
        raise NotServable(f"no {registry.worker_command(runtime_id)} to serve with (looked in "
                          f"{', '.join(catalog.shipped_dirs())})", fix="reinstall superfluid")
    if "lib" not in values and install is None:
        nothing = catalog.nothing_to_load(runtime_id, catalog.locate(runtime_id, environ), environ)
        if nothing is not None:
            raise NotServable(nothing)  # its check's own words, and no worker started
    try:
        report, _, _ = catalog.answer(runtime_id, ["check", *runtime_argv(runtime_id, values)], environ)
    except WorkerFailed as e:
        raise NotServable(f"the {runtime_id} runtime cannot run here: {e}") from e
    available = report.get("available") if isinstance(report, dict) else None
    if available is not True:
        raise NotServable(str(available or f"the {runtime_id} check said nothing about availability"))
    return Ready(runtime_id, ref.path, report, values, install)


def usage() -> str:
    """``superfluid serve --help``: the help page of the face's tree, then every runtime's options as
    spelled on serve."""
    from superfluid.helptext import find
    from superfluid.parser import parser
    from superfluid.runtime import registry

    page = find(parser(), "serve")
    lines = [page.format_help().rstrip("\n") if page is not None else "usage: superfluid serve --model PATH ...", "",
             "runtime options (--<id>-<option> V, each checked against the runtime's declaration before anything "
             "starts):"]
    for rid in registry.IDS:
        for option in registry.get(rid).options():
            lines.append(f"  --{rid}-{option.name} V".ljust(34) + f" {option.shape()}: {option.description}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    """``superfluid serve <argv...>``; the exit code (errors are raised for the face's table).

    Raises:
        UsageError: a bad line, a model no runtime reads, ``--sessions`` held (exit 2).
        NotServable: the runtime is not installed or cannot run here (exit 4).
        ModelLoadFailed: the worker could not load the model (exit 3).
        SuperfluidError: the worker failed otherwise (exit 1).
    """
    if any(a in ("-h", "--help") for a in argv):
        sys.stdout.write(usage())
        return 0
    env = dict(os.environ if environ is None else environ)
    line = parse_line(argv)
    runtime_id = choose_runtime(line)
    with _hold_sessions(line.sessions):
        ready = readiness(runtime_id, line, env)
        from superfluid.supervise import serve_child

        return serve_child(ready, line, env)


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
    from superfluid.installer.mutex import MutexBusy, MutexError, install_mutex

    with ExitStack() as stack:
        try:
            stack.enter_context(install_mutex(directory, timeout=0, name=SESSIONS_LOCK, command="superfluid serve"))
        except MutexBusy as e:
            pid = e.holder.pid
            raise UsageError(f"--sessions {directory} is held by another server ({e.holder.describe()}): one "
                             f"server per sessions directory",
                             fix=f"stop it (kill {pid}) or give another --sessions" if pid else
                             "stop it or give another --sessions") from None
        except MutexError as e:
            raise SuperfluidError(f"--sessions {directory}: {e.message}") from None
        yield
