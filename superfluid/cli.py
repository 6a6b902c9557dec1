"""The ``superfluid`` command line: parsing, output and exit codes, nothing else.

See docs/cli.md, "Exit codes".
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys
from collections.abc import Sequence
from functools import partial
from importlib import import_module

from superfluid import answer_cache, verbosity
from superfluid.parser import (
    Exit,
    Parser,
    canonical_ids,
    find,
    load,
    overview,
    parser,
    runner,
)
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.exits import EXIT_CODES, exit_code  # the one table of exit codes (SPEC §6.1)
from superfluid.runtime.kernel.fixes import ENV_LOG, Fix, record_to
from superfluid.runtime.kernel.layout import home, home_fault
from superfluid.runtime.kernel.output import error_code, error_doc, print_json
from superfluid.source_hints import fitting, given, with_flags

# A line is answered by the module of the command it names (``superfluid.commands``, found through
# the tree of ``superfluid.parser``), imported when it runs.
#
# Start-up: the devices that hold a command within 4x a bare ``python3 -c pass`` (and serve near its
# engine's own server), each in one place, each worth what benchmarks/bench_cli.py (bench_serve.py)
# measured with it and without it (same-run medians, 2026-12-07; docs/architecture.md, "Start-up").
# Nothing else is there for speed alone.
# - the lazy command tree (``parser.parser``, and a form's own module by ``runs_in``): --version 1.55x
#   with it, 7.29x loading every command; runtimes --json computed 4.05x vs 8.12x; versions 3.11x vs 7.60x;
# - the kept whole answer (``answer_cache``, looked up first in ``main``): runtimes --json 1.62x kept,
#   4.19x computed;
# - the validation stamps (``schema.validate_once``): runtimes --json computed 4.13x vs 7.40x validating
#   each time; versions 3.32x vs 5.36x;
# - the kept worker answers (``catalog.ask``): with llamacpp installed, runtimes --json computed 4.18x vs
#   8.11x asking its worker each time;
# - the collector paused, frozen at exit (``_pause_gc``): runtimes --json computed 4.12x vs 4.54x,
#   --version 1.54x vs 1.70x;
# - serve's worker started ahead (``serve_ahead``, imported by name for a serve line only: a fork of the
#   face, ``worker_fork``, loading its engine ahead where what it loads is unchanged since it last served):
#   a restart's cold start to the first answer 1.32x llama-server's with it, 2.11x with nothing started
#   ahead (interleaved rounds).
# The caches among them keep what they keep by ``runtime.kernel.home_cache`` (a stat fingerprint per path).
__all__ = ["main", "EXIT_CODES", "exit_code"]

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

    # a fault on an open descriptor carries its number, not a path (an fdopen of a directory)
    where = os.fsdecode(e.filename) if isinstance(e.filename, (str, bytes, os.PathLike)) and e.filename else None
    text = f"{where}: {e.strerror or e}" if where else str(e.strerror or e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the file system holding {where or 'SUPERFLUID_HOME'}"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and where:
        fix = f"check the permissions of {where} and that its file system is writable"
    elif e.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR) and where:
        fix = f"something else is at {where} (or in its path): move it, or name another path"
    else:
        fix = "check SUPERFLUID_HOME (a writable directory) and free space"
    return SuperfluidError(text, advice=fix)


def _source_flags(args: argparse.Namespace | None) -> tuple[list[tuple[str, str | None]], bool]:
    """The source flags the failed line gave, and whether its command takes both ``--mirror`` and
    ``--offline``: read here, where a line of any command is judged, for the hint's words."""
    if args is None:
        return [], False
    flags = given(mirror=args.mirror if isinstance(args.mirror, str) else None, offline=args.offline is True,
                  plain_http=args.plain_http is True)
    return flags, bool(args.takes_source_flags)


def _prog(args: argparse.Namespace | None) -> str:
    """``superfluid runtime check``: the command whose ``--help`` a usage error points at."""
    words = ["superfluid"]
    if args is not None and args.command:
        words.append(args.command)
        if args.sub:
            words.append(args.sub)
            if args.sub == "check" and args.id:
                words.append(args.id)  # its --help lists that runtime's options
    return " ".join(words)


def _fail(error: BaseException, code: int, args: argparse.Namespace | None, as_json: bool) -> int:
    """The error on stderr (and, in ``--json`` mode, as JSON on stdout); answers the exit code. Its
    fixes keep the source flags the line gave (``source_hints.with_flags``); advice for a command that takes
    neither ``--mirror`` nor ``--offline`` drops the words that name them (``fitting``)."""
    flags, takes_both = _source_flags(args)
    fixes: tuple[Fix, ...] = ()
    advice: str | None = None
    if isinstance(error, KeyboardInterrupt):
        text = "interrupted"
    elif isinstance(error, SuperfluidError):
        fixes = tuple(with_flags(f, flags) for f in error.fixes)
        advice = fitting(error.advice, takes_both=takes_both) if error.advice else None
        text = error.text(fixes, advice or "")
    else:
        text = str(error)
    if isinstance(error, UsageError) and "--help" not in text:
        text += f" (see '{_prog(args)} --help')"
    sys.stderr.write(f"superfluid: {text}\n")
    if as_json:
        doc = error_doc(error_code(error), text, code, fixes=fixes, advice=advice)
        print_json({**(error.document or {}), **doc} if isinstance(error, SuperfluidError) else doc)
    return code


def _warn_home() -> None:
    fault = home_fault(home())
    if fault is not None:
        sys.stderr.write(f"superfluid: warning: {fault}: nothing is cached or installed there; "
                         "answering from what can be read\n")


def _pause_gc(args_in: Sequence[str]) -> bool:
    """Stop the cyclic garbage collector for the short life of a command (for ``serve``, which lives
    as long as its server, until its startup line is out: ``supervise.serve_child`` calls ``started``);
    answers whether it was on. A command's imports make tens of thousands of objects that every full
    collection walks again, the last one at exit most of all (``_resume_gc`` freezes them): runtimes
    --json computed 4.12x a bare start with it, 4.54x without (bench_cli); an install from a mirror 2
    to 4% faster. The few cycles it leaves die with the process."""
    on = gc.isenabled()
    if on:
        gc.disable()
    return on


def _resume_gc(was_on: bool, *, exiting: bool) -> None:
    if was_on:
        gc.enable()
        if exiting:  # the process ends now: no last full collection over everything it made
            gc.freeze()


def _parsed(args_in: Sequence[str]) -> tuple[argparse.Namespace, list[str], Parser]:
    """The line parsed by the command tree: its namespace, what no command took, and the tree."""
    top = parser(args_in)  # the module of the command the line names, the others named only
    args, extra = top.parse_known_args(args_in)
    canonical_ids(args)  # llama.cpp is llamacpp
    if args.version and not args.command and extra == ["--json"]:  # --version --json: as version --json
        args.json, extra = True, []
    return args, extra, top


def _path(args: argparse.Namespace) -> str:
    """The command ``args`` runs (``"runtime install"``; ``"version"`` for ``--version``), or ``""``."""
    if args.version:
        return "version"
    return " ".join(w for w in (args.command, args.sub) if w)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(args_in)
    record_to(os.environ.get(ENV_LOG))  # the test suite's hint report: every fix this run renders
    args: argparse.Namespace | None = None
    collecting = _pause_gc(args_in)
    ahead = None
    try:
        if (kept := answer_cache.lookup(args_in, os.environ)) is not None:
            sys.stdout.write(kept)  # nothing it was computed from changed: no parser, no adapter
            return 0
        if not args_in:
            sys.stderr.write(overview())
            return 2
        if args_in[0] == "serve":  # the worker this line chose last starts now, primed (superfluid.serve_ahead)
            ahead = import_module("superfluid.serve_ahead").begin(args_in, os.environ)
        args, extra, top = _parsed(args_in)
        args.ahead = ahead  # serve adopts it when it chooses that very worker
        args.started = partial(_resume_gc, collecting, exiting=False)  # a server's start is over: collect again
        if verbosity.verbose():  # the installer's log, loaded only when asked (superfluid.step_log)
            import_module("superfluid.step_log").log_each_step()
        if extra:  # named at the command that refused them, not at the top
            raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
        if args.help and not args.command:
            sys.stdout.write(overview())
            return 0
        if not (path := _path(args)):
            raise UsageError(f"{args_in[0]} needs a command first (see 'superfluid --help')")
        command = load(path)
        more_help = getattr(command, "more_help", None)  # a command that reads its own flags (runtime check)
        if more_help is not None and not args.version and {"-h", "--help"} & set(args.rest):
            page = find(top, path)
            assert page is not None
            sys.stdout.write(page.format_help() + "\n" + more_help(args))
            return 0
        module = runner(command, args, os.environ)  # the command's module, or another's for its flags
        if getattr(module, "READS_HOME", False):
            _warn_home()
        return int(module.run(args))
    except Exit as e:  # argparse finished the command line itself (--help printed)
        return e.status
    except BrokenPipeError:
        return 1
    except OSError as e:  # a backstop: a filesystem fault below that no typed error named
        return _fail(_os_fault(e), exit_code(e), args, as_json)
    except (SuperfluidError, KeyboardInterrupt) as e:
        return _fail(e, exit_code(e), args, as_json)
    finally:
        if ahead is not None:
            ahead.close()  # not adopted: a refusal, a help page, a failure
        _resume_gc(collecting, exiting=argv is None)
