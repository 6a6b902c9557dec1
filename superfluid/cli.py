"""The ``superfluid`` command line: parsing, output and exit codes, nothing else (SPEC §6).

Every error below the face is a typed exception; this module maps its class to an exit code in one
table (SPEC §6.1) and prints ``superfluid: <message>`` on stderr. Command modules are imported only
when their command runs, so ``superfluid --help`` and ``superfluid runtimes`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import NoReturn

from superfluid import __version__
from superfluid.runtime.errors import ModelLoadFailed, NotServable, SuperfluidError, UsageError

__all__ = ["main", "EXIT_CODES"]

#: error class -> exit code (SPEC §6.1); the first matching class wins
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, 2),
    (NotServable, 4),
    (ModelLoadFailed, 3),
    (SuperfluidError, 1),
)

_OVERVIEW = """\
superfluid: install, verify and drive superfluid's inference engines

commands:
  runtimes [--json]                     what is installed and ready here
  compat [--json] [--release FILE|URL]  what this release drives (or another release's compat.json)
  runtime install <id> [flags]          fetch, verify and install a runtime (basert, llamacpp, mlx)
  runtime versions <id> [--json]        the versions a runtime installs, and which install here
  runtime options <id> [--json]         the options a runtime takes on serve
  runtime check <id> [--<option> V]...  probe a runtime with options (checked before it starts)
  runtime update|repair|remove|use <id> manage installs
  version                               print the version

Run 'superfluid <command> --help' for a command's flags. Exit codes: 0 done, 1 run-time failure,
2 usage error, 3 model did not load, 4 runtime not installed or cannot run here (serve).
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of exiting, so the face's table decides."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON (schema'd) instead of a table")


def _install_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="runtime id: basert, llamacpp or mlx")
    p.add_argument("--version", dest="want_version", metavar="V", help="install this version (e.g. 0.4.0, b11642)")
    p.add_argument("--backend", metavar="B", help="install this backend (cpu, cuda-13.4, vulkan, metal...)")
    p.add_argument("--from", dest="from_", metavar="URL|PATH", help="install this archive instead of a release's")
    p.add_argument("--sha256", metavar="H", help="the digest --from's archive (or an unpinned asset) must have")
    p.add_argument("--untested", action="store_true", help="allow a version of another ABI or not tested")
    p.add_argument("--dry-run", action="store_true", help="print the ordered plans and change nothing")
    p.add_argument("--offline", action="store_true", help="use the cache only; never open a connection")
    p.add_argument("--mirror", metavar="URL|DIR", help="fetch releases from this mirror (or SUPERFLUID_MIRROR)")
    _add_json(p)
    _for_flags(p)


def _for_flags(p: argparse.ArgumentParser) -> None:
    from superfluid.commands.for_release import add_flags

    add_flags(p)


def _parser() -> argparse.ArgumentParser:
    top = _Parser(prog="superfluid", add_help=False)
    top.add_argument("-h", "--help", action="store_true")
    top.add_argument("-V", "--version", action="store_true")
    sub = top.add_subparsers(dest="command", parser_class=_Parser)
    sub.add_parser("version", help="print the version")
    p = sub.add_parser("runtimes", help="what is installed and ready here")
    _add_json(p)
    p = sub.add_parser("compat", help="what this release drives")
    _add_json(p)
    p.add_argument("--release", metavar="FILE|URL", help="read and verify another release's compat.json")
    p.add_argument("--key", action="append", metavar="FILE", help="also trust this minisign public key (repeatable)")
    p.add_argument("--require-signature", action="store_true", help="refuse a --release document with no signature")
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
    return top


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
}


def exit_code(error: BaseException) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args_in:
            sys.stderr.write(_OVERVIEW)
            return 2
        args = _parser().parse_args(args_in)
        if args.help and not args.command:
            sys.stdout.write(_OVERVIEW)
            return 0
        if args.version or args.command == "version":
            sys.stdout.write(f"superfluid {__version__}\n")
            return 0
        if not args.command:
            raise UsageError(f"{args_in[0]} needs a command first (see 'superfluid --help')")
        module = import_module(f"superfluid.commands.{_COMMANDS[(args.command, getattr(args, 'sub', None))]}")
        return int(module.run(args))
    except SuperfluidError as e:
        sys.stderr.write(f"superfluid: {e}\n")
        return exit_code(e)
    except KeyboardInterrupt:
        sys.stderr.write("superfluid: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1
