"""The worker command line shared by every adapter: ``superfluid-worker-<id> <command>``.

See docs/cli.md, "Workers: `superfluid-worker-<id> <command>`".
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

from superfluid.runtime.contract import report_fixes
from superfluid.runtime.kernel.errors import ModelLoadFailed, NotServable, UsageError, guarded
from superfluid.runtime.kernel.layout import worker_command
from superfluid.runtime.kernel.lookup import GO, LOAD_FIRST, PRIMED_VARIABLE, Lookup, read
from superfluid.runtime.registry import get

if TYPE_CHECKING:
    from superfluid.runtime.adapter import Adapter

# Each command is a worker's main: it reads the environment once (``kernel.lookup.read``) and hands
# the record down. Each command's module is imported when that command runs, as the face's dispatch imports a
# command's: check and serve the adapter package's, plan and install runtime.install_step, the
# declarations runtime.declaration. A primed check (an install's probe, started while the archive
# arrives) so imports what it checks with and no more.

__all__ = ["run", "Handler", "Check", "engine_handlers", "check_handlers", "die_with_parent", "serve_module"]

Handler = Callable[[list[str]], int]
#: the modules of the commands every worker has, imported when their command runs
_INSTALL_STEP = "superfluid.runtime.install_step"  # plan, install
_DECLARATION = "superfluid.runtime.declaration"  # compat, versions, options
_DECLARATIONS = ("compat", "versions", "options")
#: a runtime's check: its command line and the environment as read (``kernel.lookup``) in, the report and
#: exit code out
Check = Callable[[list[str], Lookup], tuple[dict[str, Any], int]]


def _line(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")


def _exit_now(code: int) -> None:
    """End a primed check as soon as its report is out: the installer waits for its exit code, and
    the interpreter's teardown (every module, the loaded engine) took longer than the check itself
    (measured: 10 ms against 5 ms). Nothing is left to write: its output is flushed first."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        code = code or 1
    os._exit(code)


#: PR_SET_PDEATHSIG (linux/prctl.h): the signal the kernel sends a child when its parent dies
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent dies (a server's worker never outlives
    its ``superfluid serve``); nothing where there is no ``prctl``. Run by the worker itself, or
    between fork and exec (``supervise``), or by a fork of the face told what worker to be
    (``superfluid.worker_fork``)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the forwarded signals are the only stop


def _told_to_go() -> bool:
    """A primed ``serve``: its imports done (``1``; with ``LOAD_FIRST`` its engine loaded too), it waits
    for its face (``superfluid serve``, which started it before deciding what to serve) to say ``GO`` on
    stdin; anything else (its stdin closed: another worker chosen, nothing to serve, the face gone) is
    no. Before that line no port is bound, and but for ``LOAD_FIRST`` no engine loaded. Told to go, it
    dies with the face from then on (started ahead, it was not set so between fork and exec: that made
    the start a fork, not a vfork), unless the face is gone already."""
    face = os.getppid()
    try:
        said = sys.stdin.buffer.readline(len(GO) + 1)
    except (OSError, ValueError):
        return False
    if said != GO:
        return False
    die_with_parent()
    return os.getppid() == face


def serve_module(package: str) -> str:
    """The module of an adapter package whose ``serve`` a worker's ``serve`` runs (docs/adapters.md)."""
    return f"{package}.serve"


def _takes_gate(serve: Callable[..., int]) -> bool:
    """Whether an engine's ``serve`` takes ``gate`` (docs/adapters.md: the gate asked between its load and
    its bind), read from its code (an adapter written before it has three parameters)."""
    code = getattr(serve, "__code__", None)
    return code is not None and "gate" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def engine_handlers(package: str, prog: str) -> dict[str, Handler]:
    """``check``, ``plan``, ``install`` and ``serve`` of an adapter package that has the standard
    modules: ``adapter.ADAPTER``, ``check.check_argv`` and ``serve.serve`` (imported when their
    command runs, so a worker starts fast); ``plan`` and ``install`` are ``runtime.install_step``'s.

    Exit codes: ``check`` 0 available, else 1; ``plan``/``install`` 0, 1 refused, 2 a bad line;
    ``serve`` 0 clean stop (or, started primed, never told to go), 1 serving failed, 2 a bad line, 3
    the model did not load. A serve started primed (``PRIMED_VARIABLE``) waits for ``GO`` before it
    loads anything (``1``), or loads its engine and waits before it binds (``LOAD_FIRST``).
    """
    def check(argv: list[str]) -> int:
        module = import_module(f"{package}.check")
        primed = os.environ.pop(PRIMED_VARIABLE, None) == "1"
        if primed:  # started before its library arrived (an install's probe): ready now, it checks once
            sys.stdin.buffer.read()  # the installer closes stdin
        report, code = module.check_argv(argv, read(os.environ))
        _line(report)
        if primed:
            _exit_now(int(code))
        return int(code)

    def plan(argv: list[str]) -> int:
        step = import_module(_INSTALL_STEP)
        _line(step.plan_answer(import_module(f"{package}.adapter").ADAPTER, argv, read(os.environ)))
        return 0

    def install(argv: list[str]) -> int:
        step = import_module(_INSTALL_STEP)
        adapter = import_module(f"{package}.adapter").ADAPTER
        into, text = step.parse_install(argv)
        _line(step.judge_and_record(adapter, into, step.plan_of_json(text, adapter.id), read(os.environ)))
        return 0

    def serve(argv: list[str]) -> int:
        collecting = gc.isenabled()
        gc.disable()  # for the imports (thousands of objects, no cycle worth a collection): ~10% of their time
        try:
            module = import_module(serve_module(package))
            primed = os.environ.pop(PRIMED_VARIABLE, None)
            if primed == LOAD_FIRST and not _takes_gate(module.serve):
                primed = "1"  # an engine's serve that cannot wait between load and bind waits before it loads
            if primed == "1" and not _told_to_go():
                return 0  # started ahead of its face's decision (``superfluid serve``), and not the worker it chose
        finally:
            if collecting:
                gc.enable()  # a server lives long
        try:
            if primed == LOAD_FIRST:  # what it loads unchanged since its face last served it: it binds once told to go
                return int(module.serve(argv, read(os.environ), sys.stdout, gate=_told_to_go))
            return int(module.serve(argv, read(os.environ), sys.stdout))
        except ModelLoadFailed as e:
            sys.stderr.write(f"{prog}: model load failed: {e}\n")
            return 3

    return {"check": check, "plan": plan, "install": install, "serve": serve}


def check_handlers(check: Check) -> dict[str, Handler]:
    """``check`` and ``version`` of a runtime whose check is one function (``runtime.contract``):
    ``check`` prints its report (exit 0 available, else 1); ``version`` prints the report's
    ``runtime.version``, or exits 1 with the reason it is not available.
    """
    def checked(argv: list[str]) -> int:
        report, code = check(argv, read(os.environ))
        _line(report)
        return int(code)

    def version(argv: list[str]) -> int:
        report, _ = check(argv, read(os.environ))
        if report.get("available") is not True:
            raise NotServable(str(report.get("available")), fix=report_fixes(report))  # its fixes, as values
        sys.stdout.write(f"{report['runtime']['version']}\n")
        return 0

    return {"check": checked, "version": version}


def _usage(adapter_id: str, handlers: dict[str, Handler]) -> str:
    commands = sorted({*_DECLARATIONS, *handlers})
    return f"usage: {worker_command(adapter_id)} <{'|'.join(commands)}> [flags]"


#: what each worker command does, for ``--help``
_COMMAND_HELP = {
    "version": "print the engine's version",
    "check": "[--model PATH] [--<option> V]...: one JSON line: available (true or why not), ABI, devices, the model",
    "compat": "--json: the compat declaration this build ships",
    "versions": "--json: the versions it installs, which install here and why",
    "options": "--json: the options it takes (name, type, accepted values)",
    "plan": "[request flags]: the ordered install plans for this machine, as JSON",
    "install": "--into DIR --plan JSON: install one plan into DIR; prints its receipt",
    "serve": "[--model PATH] [options]: serve a model to superfluid serve (its parent)",
}


def _help(adapter: Adapter, handlers: dict[str, Handler]) -> str:
    """``--help``: the usage line, each command, examples and exit codes."""
    prog = worker_command(adapter.id)
    commands = sorted({*_DECLARATIONS, *handlers})
    lines = [_usage(adapter.id, handlers), "",
             f"The {adapter.id} worker: what superfluid runs to ask and drive the engine (docs/cli.md, "
             f"\"Workers\"); people use `superfluid runtime check {adapter.id}` and `superfluid serve`.", "",
             "commands:"]
    lines += [f"  {c:<9} {_COMMAND_HELP.get(c, '')}".rstrip() for c in commands]
    lines += ["", "examples:", f"  {prog} check", f"  {prog} options --json", f"  {prog} versions --json"]
    lines += ["", "exit codes:", "  0  done (check: available)", "  1  a failure (check: not available, and why)",
              "  2  a usage error: an unknown command or flag"]
    if "serve" in handlers:
        lines.append("  3  (serve) the model did not load")
    return "\n".join(lines) + "\n"


def run(adapter: Adapter | str, argv: Sequence[str] | None, handlers: dict[str, Handler]) -> int:
    """Dispatch one worker command line; the exit code (0 ok, 1 failure, 2 usage).

    ``adapter``: the runtime's adapter, or its id: then the registry loads the adapter (its planner,
    the host probes...) only for the commands that ask it, help and the declarations, never for a
    check (an install's probe starts a worker while the archive arrives: it imports what it checks
    with, no more).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    runtime_id = adapter if isinstance(adapter, str) else adapter.id

    def the_adapter() -> Adapter:
        return get(adapter) if isinstance(adapter, str) else adapter

    prog = worker_command(runtime_id)
    if not args or args[0] in ("-h", "--help", "help"):
        if not args:
            sys.stderr.write(_usage(runtime_id, handlers) + "\n")
            return 2
        sys.stdout.write(_help(the_adapter(), handlers))
        return 0
    command, rest = args[0], args[1:]

    def dispatch() -> int:
        if command in _DECLARATIONS:
            _line(import_module(_DECLARATION).declaration(the_adapter(), command, rest, read(os.environ)))
            return 0
        handler = handlers.get(command)
        if handler is None:
            raise UsageError(f"unknown command {command!r}; {_usage(runtime_id, handlers)}")
        return handler(rest)

    return guarded(prog, dispatch)
