"""The ``superfluid`` command line: parsing, output and exit codes, nothing else.

See docs/cli.md, "Exit codes".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from superfluid import __version__, answer_cache, quickparse
from superfluid.runtime.errors import ModelLoadFailed, NotServable, SuperfluidError, UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["main", "EXIT_CODES", "exit_code"]

#: error class -> exit code (SPEC §6.1); the first matching class wins
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, 2),
    (NotServable, 4),
    (ModelLoadFailed, 3),
    (SuperfluidError, 1),
)

#: (command, sub) -> module in superfluid.commands with a ``run(args) -> int``
_COMMANDS = {
    ("runtimes", None): "runtimes",
    ("compat", None): "compat",
    ("runtime", "install"): "install",
    ("runtime", "update"): "install",
    ("runtime", "repair"): "install",
    ("runtime", "remove"): "manage",
    ("runtime", "use"): "manage",
    ("runtime", "list"): "installs",
    ("runtime", "versions"): "declarations",
    ("runtime", "options"): "declarations",
    ("runtime", "check"): "check",
    ("lock", None): "lock",
    ("mirror", "sync"): "mirror",
    ("mirror", "verify"): "mirror",
    ("mirror", "push"): "mirror",
    ("runtime", "verify"): "verify",
    ("runtime", "gc"): "gc",
    ("cache", "dir"): "cache",
    ("cache", "du"): "cache",
    ("cache", "prune"): "cache",
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


def _os_fault(e: OSError) -> SuperfluidError:
    """A filesystem fault no typed error named, as the path at fault, why, and what to look at."""
    import errno

    where = os.fspath(e.filename) if e.filename else None
    text = f"{where}: {e.strerror or e}" if where else str(e.strerror or e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the file system holding {where or 'SUPERFLUID_HOME'}"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and where:
        fix = f"check the permissions of {where} and that its file system is writable"
    elif e.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR) and where:
        fix = f"something else is at {where} (or in its path): move it, or name another path"
    else:
        fix = "check SUPERFLUID_HOME (a writable directory) and free space"
    return SuperfluidError(text, fix=fix)


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


def _fail(error: BaseException, code: int, args: argparse.Namespace | None, as_json: bool) -> int:
    """The error on stderr (and, in ``--json`` mode, as JSON on stdout); answers the exit code."""
    from superfluid.commands.source_hints import given, keep_source
    from superfluid.output import error_code, error_doc, print_json

    flags = given(args)  # a command the message suggests keeps the --mirror/--offline given
    text = keep_source(str(error), flags) if not isinstance(error, KeyboardInterrupt) else "interrupted"
    if isinstance(error, UsageError) and "--help" not in text:
        text += f" (see '{_prog(args)} --help')"
    sys.stderr.write(f"superfluid: {text}\n")
    if as_json:
        fix = error.fix if isinstance(error, SuperfluidError) else None
        doc = error_doc(error_code(error), text, code, fix=keep_source(fix, flags) if fix else None)
        print_json({**(error.document or {}), **doc} if isinstance(error, SuperfluidError) else doc)
    return code


#: commands that only read the home: they answer from what they can read, with one warning when it
#: cannot be written (a file, not writable, a read-only file system)
_READS_HOME = {("runtimes", None), ("compat", None), ("runtime", "versions"), ("runtime", "options"),
               ("runtime", "check"), ("runtime", "verify"), ("runtime", "list"), ("cache", "dir"), ("cache", "du")}


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
        if (kept := answer_cache.lookup(args_in, os.environ)) is not None:
            sys.stdout.write(kept)  # nothing it was computed from changed: no parser, no adapter
            return 0
        if (args := quickparse.parse(args_in)) is None:  # else a line asked on every run: no command tree
            from superfluid.helptext import overview
            from superfluid.parser import canonical_ids, check_help, parser

            top = parser(args_in)  # the adapters' flags only on the command the line names
            if not args_in:
                sys.stderr.write(overview(top))
                return 2
            if args_in[0] == "serve":  # serve reads its own line: its --<id>-<option> flags are the adapters'
                from argparse import Namespace

                args = Namespace(command="serve", offline="--offline" in args_in[1:])  # kept by the hints it prints
                return int(import_module("superfluid.commands.serve").main(args_in[1:]))
            args, extra = top.parse_known_args(args_in)
            canonical_ids(args)  # llama.cpp is llamacpp
            if args.version and not args.command and extra == ["--json"]:  # --version --json: as version --json
                args.json, extra = True, []
            if extra:  # named at the command that refused them, not at the top
                raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
            if args.help and not args.command:
                sys.stdout.write(overview(top))
                return 0
            if args.command == "runtime" and args.sub == "check" and not args.version \
                    and {"-h", "--help"} & set(args.rest):  # --version first, as it was
                sys.stdout.write(check_help(top, args.id))
                return 0
        if args.version or args.command == "version":
            if getattr(args, "json", False):
                from superfluid.output import print_json

                print_json({"superfluid": __version__})  # schema version
            else:
                sys.stdout.write(f"superfluid {__version__}\n")
            return 0
        if not args.command:
            raise UsageError(f"{args_in[0]} needs a command first (see 'superfluid --help')")
        module = import_module(f"superfluid.commands.{_COMMANDS[(args.command, getattr(args, 'sub', None))]}")
        if getattr(args, "plain_http", False):  # read below as the variable is (installer/sources/oci/ref.py)
            os.environ["SUPERFLUID_OCI_PLAIN_HTTP"] = "1"
        if (args.command, getattr(args, "sub", None)) in _READS_HOME:
            _warn_home()
        return int(module.run(args))
    except OSError as e:  # a backstop: a filesystem fault below that no typed error named
        return _fail(_os_fault(e), 1, args, as_json)
    except SuperfluidError as e:
        return _fail(e, exit_code(e), args, as_json)
    except KeyboardInterrupt as e:
        return _fail(e, 130, args, as_json)
    except BrokenPipeError:
        return 1
    except Exception as e:
        from superfluid.parser import Exit  # raised by the parser only, so imported by then

        if isinstance(e, Exit):  # argparse finished the command line itself (--help printed)
            return e.status
        raise
    finally:
        _resume_gc(collecting, exiting=argv is None)
