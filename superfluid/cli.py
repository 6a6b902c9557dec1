"""The ``superfluid`` command line: parsing, output and exit codes, nothing else (SPEC §6).

Every error below the face is a typed exception; this module maps its class to an exit code in one
table (SPEC §6.1) and prints ``superfluid: <message>`` on stderr, and, when the command line asked
for ``--json``, ``{"error": {"code", "message", "exit"}}`` on stdout (schema ``error``). A usage
error points at the command's own ``--help``; every command's help page (description, flags,
examples, exit codes) comes from ``superfluid.helptext``. Command modules are imported only when
their command runs, so ``superfluid --help`` and ``superfluid runtimes`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any, NoReturn

from superfluid import __version__
from superfluid.helptext import FLAG_HELP, dress, find, overview
from superfluid.runtime.errors import ModelLoadFailed, NotServable, SuperfluidError, UsageError

__all__ = ["main", "EXIT_CODES", "exit_code", "parser"]

#: error class -> exit code (SPEC §6.1); the first matching class wins
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, 2),
    (NotServable, 4),
    (ModelLoadFailed, 3),
    (SuperfluidError, 1),
)



class _Exit(Exception):
    """argparse finished the command line itself (``--help`` printed): exit with ``status``."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of exiting, so the face's table decides."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise _Exit(status)


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help=FLAG_HELP["--json"])


def _install_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", nargs="?", help="runtime id: basert, llamacpp or mlx (with --locked: every runtime locked)")
    p.add_argument("--locked", nargs="?", const="", metavar="FILE",
                   help="install what this lock names for this machine (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--version", dest="want_version", metavar="V", help="install this version (e.g. 0.4.0, b11642)")
    p.add_argument("--backend", metavar="B", help="install this backend (cpu, cuda-13.4, vulkan, metal...)")
    p.add_argument("--from", dest="from_", metavar="URL|PATH", help="install this archive instead of a release's")
    p.add_argument("--sha256", metavar="H", help="the digest --from's archive (or an unpinned asset) must have")
    p.add_argument("--untested", action="store_true", help="allow a version of another ABI or not tested")
    p.add_argument("--dry-run", action="store_true", help="print the ordered plans and change nothing")
    p.add_argument("--offline", action="store_true", help="use the cache only; never open a connection")
    p.add_argument("--mirror", metavar="URL|DIR", help="fetch releases from this mirror (or SUPERFLUID_MIRROR)")
    p.add_argument("--timings", action="store_true",
                   help="record the install's phases (listing, download, extract, probe, publish): on stderr, "
                        "or with --json as its timings")
    _add_json(p)
    _for_flags(p)


def _for_flags(p: argparse.ArgumentParser) -> None:
    from superfluid.commands.for_release import add_flags

    add_flags(p)


def _lock_parsers(sub: Any) -> None:
    p = sub.add_parser("lock", help="pin the engine builds of a fleet in superfluid.lock")
    p.add_argument("--runtime", action="append", metavar="ID", help="lock this runtime (repeatable; default: all)")
    p.add_argument("--platform", action="append", metavar="P", help="for this platform, e.g. linux-x64 (repeatable)")
    p.add_argument("--backend", action="append", metavar="B",
                   help="for this kind of machine: cpu, cuda, rocm, vulkan, metal (repeatable)")
    p.add_argument("--mirror", metavar="URL|DIR", help="read releases from this mirror (or SUPERFLUID_MIRROR)")
    p.add_argument("--offline", action="store_true", help="read releases from the cache only")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the lock file (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--check", action="store_true", help="say what would move and why; change nothing")
    p.add_argument("--upgrade", nargs="?", const="", action="append", metavar="ID",
                   help="choose anew (every runtime, or ID's engines) and write it")
    _for_flags(p)
    mirror = sub.add_parser("mirror", help="a static mirror of what a lock names")
    msub = mirror.add_subparsers(dest="sub", parser_class=_Parser, required=True)
    for name, what in (("sync", "fetch every file a lock names into DIR"), ("verify", "recheck DIR against a lock")):
        q = msub.add_parser(name, help=what)
        q.add_argument("dir", metavar="DIR", help="the mirror's root directory")
        q.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")


def _serve_parser(sub: Any) -> None:
    from superfluid.commands.serve import add_flags

    add_flags(sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API"))


def _parser() -> argparse.ArgumentParser:
    top = _Parser(prog="superfluid", add_help=False)
    top.add_argument("-h", "--help", action="store_true", help="show the commands and exit")
    top.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    sub = top.add_subparsers(dest="command", parser_class=_Parser)
    sub.add_parser("version", help="print the version")
    p = sub.add_parser("runtimes", help="what is installed and ready here")
    _add_json(p)
    p = sub.add_parser("compat", help="what this release drives")
    _add_json(p)
    p.add_argument("--release", metavar="FILE|URL", help="read and verify another release's compat.json")
    p.add_argument("--key", action="append", metavar="FILE", help="also trust this minisign public key (repeatable)")
    p.add_argument("--require-signature", action="store_true", help="refuse a --release document with no signature")
    p.add_argument("--service", metavar="URL", help="ask this compat manifest service (or static export) which "
                   "releases drive an engine (or SUPERFLUID_MANIFEST_URL)")
    p.add_argument("--runtime", metavar="ID", help="the engine asked about with --service: basert, llamacpp or mlx")
    p.add_argument("--abi", dest="ask_abi", metavar="N", help="--runtime basert: a library stating ABI N")
    p.add_argument("--build", dest="ask_build", metavar="B", help="--runtime llamacpp: a build, e.g. b11642")
    p.add_argument("--version", dest="ask_version", metavar="V",
                   help="--runtime mlx: an mlx version; --runtime basert: an unnumbered library's version")
    p.add_argument("--platform", metavar="P", help="with --service: on this platform (e.g. linux-x64)")
    runtime = sub.add_parser("runtime", help="install and manage runtimes")
    rsub = runtime.add_subparsers(dest="sub", parser_class=_Parser, required=True)
    _install_flags(rsub.add_parser("install", help="fetch, verify and install a runtime"))
    for name, what in (("versions", "the versions a runtime installs"), ("options", "options taken on serve")):
        q = rsub.add_parser(name, help=what)
        q.add_argument("id")
        _add_json(q)
        if name == "versions":
            _for_flags(q)
    q = rsub.add_parser("check", help="probe a runtime with options: check [--model PATH] [--json] [--<option> V]...")
    q.add_argument("id")
    q.add_argument("rest", nargs=argparse.REMAINDER, help="--model PATH, --json and --<option> <value> pairs")
    q = rsub.add_parser("update", help="install the newest installable version beside the current one")
    q.add_argument("id")
    for flag in ("--offline", "--untested", "--json", "--dry-run"):
        q.add_argument(flag, action="store_true")
    q.add_argument("--mirror", metavar="URL|DIR")
    _for_flags(q)
    q = rsub.add_parser("repair", help="reinstall an install in place (default: the current one)")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    q.add_argument("--offline", action="store_true")
    q.add_argument("--mirror", metavar="URL|DIR")
    q.add_argument("--json", action="store_true")
    q = rsub.add_parser("remove", help="remove an install (default: every install of the runtime)")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    q.add_argument("--json", action="store_true")
    q = rsub.add_parser("use", help="pin an install as the default, or --auto to unpin")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    q.add_argument("--auto", action="store_true")
    _lock_parsers(sub)
    _serve_parser(sub)
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete for")
    return dress(top)


def parser() -> argparse.ArgumentParser:
    """The whole command tree (every command, flag and help page), for ``completion`` and tests."""
    return _parser()


#: (command, sub) -> module in superfluid.commands with a ``run(args) -> int``
_COMMANDS = {
    ("runtimes", None): "runtimes",
    ("compat", None): "compat",
    ("runtime", "install"): "install",
    ("runtime", "update"): "install",
    ("runtime", "repair"): "install",
    ("runtime", "remove"): "manage",
    ("runtime", "use"): "manage",
    ("runtime", "versions"): "declarations",
    ("runtime", "options"): "declarations",
    ("runtime", "check"): "check",
    ("lock", None): "lock",
    ("mirror", "sync"): "mirror",
    ("mirror", "verify"): "mirror",
    ("completion", None): "completion",
}


def exit_code(error: BaseException) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


def _wants_json(args_in: Sequence[str]) -> bool:
    """The command line asked for JSON (``--json`` before any ``--``): failures are JSON too."""
    for token in args_in:
        if token == "--":
            return False
        if token == "--json":
            return True
    return False


def _prog(args: argparse.Namespace | None) -> str:
    """``superfluid runtime check``: the command whose ``--help`` a usage error points at."""
    words = ["superfluid"]
    if args is not None and getattr(args, "command", None):
        words.append(args.command)
        if getattr(args, "sub", None):
            words.append(args.sub)
            if args.sub == "check" and getattr(args, "id", None):
                words.append(args.id)  # its --help lists that runtime's options
    return " ".join(words)


def _check_help(top: argparse.ArgumentParser, runtime_id: str) -> str:
    """``runtime check <id> --help``: check's page, then the options that runtime takes."""
    from superfluid.runtime import registry

    page = find(top, "runtime check")
    assert page is not None
    text = page.format_help()
    registry.get(runtime_id)  # an unknown id is a usage error
    from superfluid.commands.check import options_help

    return text + "\n" + options_help(runtime_id)


def _fail(error: BaseException, code: int, args: argparse.Namespace | None, as_json: bool) -> int:
    """The error on stderr (and, in ``--json`` mode, as JSON on stdout); answers the exit code."""
    from superfluid.output import error_code, error_doc, print_json

    text = str(error) if not isinstance(error, KeyboardInterrupt) else "interrupted"
    if isinstance(error, UsageError) and "--help" not in text:
        text += f" (see '{_prog(args)} --help')"
    sys.stderr.write(f"superfluid: {text}\n")
    if as_json:
        fix = error.fix if isinstance(error, SuperfluidError) else None
        print_json(error_doc(error_code(error), text, code, fix=fix))
    return code


#: commands that only read the home: they answer from what they can read, with one warning when it
#: cannot be written (a file, not writable, a read-only file system)
_READS_HOME = {("runtimes", None), ("compat", None), ("runtime", "versions"), ("runtime", "options"),
               ("runtime", "check")}


def _warn_home() -> None:
    from superfluid.runtime.home import home, home_fault

    fault = home_fault(home())
    if fault is not None:
        sys.stderr.write(f"superfluid: warning: {fault}: nothing is cached or installed there; "
                         "answering from what can be read\n")


def _pause_gc(args_in: Sequence[str]) -> bool:
    """Stop the cyclic garbage collector for the short life of a command (not for ``serve``, which
    lives as long as its server); answers whether it was on. A command's imports make tens of
    thousands of objects that every full collection walks again (measured: ~60 ms of a 0.7 s
    install); the few cycles it leaves die with the process."""
    import gc

    on = gc.isenabled()
    if on and list(args_in[:1]) != ["serve"]:
        gc.disable()
    return on


def _resume_gc(was_on: bool, *, exiting: bool) -> None:
    import gc

    if was_on:
        gc.enable()
        if exiting:  # the process ends now: no last full collection over everything it made
            gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(args_in)
    args: argparse.Namespace | None = None
    collecting = _pause_gc(args_in)
    try:
        top = _parser()
        if not args_in:
            sys.stderr.write(overview(top))
            return 2
        if args_in[0] == "serve":  # serve reads its own line: its --<id>-<option> flags are the adapters'
            args = argparse.Namespace(command="serve")
            return int(import_module("superfluid.commands.serve").main(args_in[1:]))
        args, extra = top.parse_known_args(args_in)
        if extra:  # named at the command that refused them, not at the top
            raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
        if args.help and not args.command:
            sys.stdout.write(overview(top))
            return 0
        if args.version or args.command == "version":
            sys.stdout.write(f"superfluid {__version__}\n")
            return 0
        if not args.command:
            raise UsageError(f"{args_in[0]} needs a command first (see 'superfluid --help')")
        if args.command == "runtime" and args.sub == "check" and ({"-h", "--help"} & set(args.rest)):
            sys.stdout.write(_check_help(top, args.id))
            return 0
        module = import_module(f"superfluid.commands.{_COMMANDS[(args.command, getattr(args, 'sub', None))]}")
        if (args.command, getattr(args, "sub", None)) in _READS_HOME:
            _warn_home()
        return int(module.run(args))
    except _Exit as e:
        return e.status
    except OSError as e:  # a backstop: a filesystem fault below that no typed error named
        where = f"{e.filename}: " if e.filename else ""
        return _fail(SuperfluidError(f"{where}{e.strerror or e}",
                                     fix="check SUPERFLUID_HOME (a writable directory) and free space"), 1, args,
                     as_json)
    except SuperfluidError as e:
        return _fail(e, exit_code(e), args, as_json)
    except KeyboardInterrupt as e:
        return _fail(e, 130, args, as_json)
    except BrokenPipeError:
        return 1
    finally:
        _resume_gc(collecting, exiting=argv is None)
