"""What ``superfluid serve`` is asked, every value checked, and the runtime found able to serve it.

See docs/host-contract.md, "1. Starting a server".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from superfluid.installer.home.installs import check_install_name
from superfluid.optionflags import check_runtime_options, split_serve_options, worker_argv
from superfluid.paths import flag_path, model_path
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.serving.flags import listen_flags, max_context_flag, queue_flag

__all__ = ["ServeCommand", "ServeFlags", "Ready", "FLAGS", "HELP_HINT", "shown_options", "parse_line", "runtime_argv"]

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
    "--queue": ("N", "requests that may wait while every sequence generates (default 16); more are answered 503"),
}
#: where a refusal of the line points
HELP_HINT = "see 'superfluid serve --help'"


def shown_options() -> dict[str, tuple[str, str]]:
    """The runtime options shown among serve's flags, ``--<id>-<option>`` -> (its value's name, what it
    does): each runtime's ``serve_flags`` (its ``registry.presentation``; every ``--<id>-<option>`` is
    taken; these the host contract names)."""
    return {f"--{rid}-{f.option}": (f.metavar, f.words)
            for rid in registry.IDS for f in registry.presentation(rid).serve_flags}


@dataclass(kw_only=True, frozen=True, slots=True)
class ServeFlags:
    """The serve line as the command tree parsed it, before any check: what ``parse_line`` judges."""

    #: serve's own flags (``FLAGS``) as given: a value, True for a switch, None when absent
    own: Mapping[str, str | bool | None]
    #: what no flag took (a stray argument, an unknown ``--flag``)
    unknown: tuple[str, ...] = ()
    #: the ``--<id>-<option> V`` pairs, in order
    runtime_options: tuple[tuple[str, str], ...] = ()


@dataclass(kw_only=True, frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Ready:
    """A runtime found able to serve: the worker that serves, its check and the options it gets."""

    runtime_id: str
    worker: str
    #: its check's report, or None when serve did not need it before its worker started (the worker's
    #: own start judges the library; the check is asked only to say why it failed)
    report: dict[str, Any] | None
    values: dict[str, Any]
    install: str | None  # the install directory named by --runtime ID@INSTALL


def _refuse_unknown(tokens: Sequence[str], ids: Sequence[str]) -> None:
    """What the line gives that serve does not declare, refused by the first of it.

    Raises:
        UsageError: a stray argument, an option a runtime does not take, an unknown flag.
    """
    if not tokens:
        return
    token = tokens[0]
    if not token.startswith("--") or token == "--":
        raise UsageError(f"unexpected argument {token!r}: serve takes flags only ({HELP_HINT})")
    flag = token.partition("=")[0]
    if any(flag.startswith(f"--{i}-") for i in ids):  # every option is declared: this one no runtime takes
        for rid, given in split_serve_options([(flag[2:], "")], ids).items():
            check_runtime_options(rid, given, prefix=f"{rid}-")
    raise UsageError(f"unknown flag {flag}: not a serve flag, nor --<runtime>-<option> of a runtime this "
                     f"superfluid ships ({', '.join(ids)}) ({HELP_HINT})")


def _runtime_flag(value: str | None) -> tuple[str | None, str | None]:
    """``--runtime ID[@INSTALL]`` checked: the id names a runtime this release ships, the install
    is an install name.

    Raises:
        UsageError: either is not.
    """
    if value is None:
        return None, None
    runtime_id, at, install = value.partition("@")
    runtime_id = registry.canonical(runtime_id)  # llama.cpp is llamacpp
    registry.get(runtime_id)
    if not at:
        return runtime_id, None
    if not install:
        raise UsageError(f"--runtime {value!r}: name the install after '@' (e.g. {runtime_id}@0.4.0-cpu)")
    return runtime_id, check_install_name(install)


def parse_line(flags: ServeFlags) -> ServeCommand:
    """The serve line the command tree parsed (``flags``), every value checked (nothing is looked up but
    the model path).

    Raises:
        UsageError: no ``--model``, a model path that names nothing, an unknown flag, a bad value of
            a serve flag, an option a runtime does not declare or a value of the wrong shape.
    """
    _refuse_unknown(flags.unknown, registry.IDS)
    own = {flag: value for flag, (meta, _) in FLAGS.items()
           if meta is not None and isinstance(value := flags.own.get(flag), str)}
    host, port = listen_flags(own)
    runtime, install = _runtime_flag(own.get("--runtime"))
    options = {rid: check_runtime_options(rid, given, prefix=f"{rid}-")
               for rid, given in split_serve_options(flags.runtime_options,
                                                     registry.IDS).items()}
    max_context, queue = max_context_flag(own), queue_flag(own)
    model = own.get("--model")
    if model is None:
        raise UsageError(f"serve needs --model PATH ({HELP_HINT})")
    sessions = own.get("--sessions")
    if sessions is not None:  # made when missing; something else there is named for what it is
        flag_path(sessions, "--sessions", "sessions directory", must_exist=False)
    model_path("--model", model, runtime)  # a FIFO or a device would hold the format probe forever
    return ServeCommand(model=os.path.abspath(model), runtime=runtime, install=install,
                        offline=flags.own.get("--offline") is True, sessions=sessions, host=host, port=port,
                        max_context=max_context, queue=queue, options=options)


def runtime_argv(runtime_id: str, values: Mapping[str, Any]) -> list[str]:
    """Checked option values as serve spells them, ``--<id>-<option> V`` (``--basert-lib P``): every
    worker takes an option so (docs/adapters.md, "The worker contract"), and what it says of a flag
    (its report's ``named``) is then the flag the serve line gave."""
    return worker_argv(values, prefix=f"{runtime_id}-")
