"""The command tree of ``superfluid``: every command, flag and help page, as argparse parsers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from superfluid.helptext import FLAG_HELP, RUNTIME_IDS, dress, find
from superfluid.runtime.errors import UsageError

__all__ = ["Exit", "parser", "check_help", "canonical_ids"]


class Exit(Exception):
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
        raise Exit(status)


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help=FLAG_HELP["--json"])


def _install_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", nargs="?", help=f"runtime id: {RUNTIME_IDS} (with --locked: every runtime locked)")
    p.add_argument("--locked", nargs="?", const="", metavar="FILE",
                   help="install what this lock names for this machine (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--version", dest="want_version", metavar="V", help="install this version (e.g. 0.4.0, b11642)")
    p.add_argument("--backend", metavar="B", help="install this backend (cpu, cuda-13.4, vulkan, metal...)")
    p.add_argument("--from", dest="from_", metavar="URL|PATH", help="install this archive instead of a release's")
    p.add_argument("--sha256", metavar="H", help="the digest --from's archive (or an unpinned asset) must have")
    p.add_argument("--untested", action="store_true", help="allow a version of another ABI or not tested")
    p.add_argument("--dry-run", action="store_true", help="print the ordered plans and change nothing")
    p.add_argument("--reinstall", action="store_true",
                   help="install again what is already installed from the same archive (by default: said, and "
                        "nothing is fetched)")
    p.add_argument("--offline", action="store_true", help="use the cache only; never open a connection")
    p.add_argument("--mirror", metavar="URL|DIR", help="fetch releases from this mirror (or SUPERFLUID_MIRROR)")
    p.add_argument("--plain-http", action="store_true")
    p.add_argument("--timings", action="store_true",
                   help="record the install's phases (listing, download, extract, probe, publish): on stderr, "
                        "or with --json as its timings")
    _add_json(p)
    _for_flags(p)


def _for_flags(p: argparse.ArgumentParser) -> None:
    from superfluid.commands.for_release import add_flags

    add_flags(p)


def _trust_flags(p: argparse.ArgumentParser) -> None:
    from superfluid.commands.trust_flags import add_flags

    add_flags(p)


def _lock_parsers(sub: Any) -> None:
    p = sub.add_parser("lock", help="pin the engine builds of a fleet in superfluid.lock")
    p.add_argument("--runtime", action="append", metavar="ID", help="lock this runtime (repeatable; default: all)")
    p.add_argument("--platform", action="append", metavar="P", help="for this platform, e.g. linux-x64 (repeatable)")
    p.add_argument("--backend", action="append", metavar="B",
                   help="for this kind of machine: cpu, cuda, rocm, vulkan, metal (repeatable)")
    p.add_argument("--mirror", metavar="URL|DIR", help="read releases from this mirror (or SUPERFLUID_MIRROR)")
    p.add_argument("--offline", action="store_true", help="read releases from the cache only")
    p.add_argument("--plain-http", action="store_true")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the lock file (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--check", action="store_true", help="say what would move and why; change nothing")
    p.add_argument("--upgrade", nargs="?", const="", action="append", metavar="ID",
                   help="choose anew (every runtime, or ID's engines) and write it")
    _add_json(p)
    _for_flags(p)
    mirror = sub.add_parser("mirror", help="a static mirror of what a lock names")
    msub = mirror.add_subparsers(dest="sub", parser_class=_Parser, required=True)
    for name, what in (("sync", "fetch every file a lock names into DIR"), ("verify", "recheck DIR against a lock")):
        q = msub.add_parser(name, help=what)
        q.add_argument("dir", metavar="DIR", help="the mirror's root directory")
        q.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")
    q = msub.add_parser("push", help="push every file a lock names to an OCI registry")
    q.add_argument("to", metavar="oci://HOST/REPO", help="the registry repository, e.g. oci://registry.example:5000/fleet/engines")
    q.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")
    q.add_argument("--plain-http", action="store_true")
    _add_json(q)


def _home_parsers(sub: Any, rsub: Any) -> None:
    """The home over months: ``runtime verify``, ``runtime gc`` and ``cache dir|du|prune``."""
    q = rsub.add_parser("verify", help="check an install's files against its receipt")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    _add_json(q)
    q = rsub.add_parser("gc", help="remove old installs of a runtime")
    q.add_argument("id")
    q.add_argument("--keep", metavar="N", help="keep the newest N installs (default 2), besides current and pinned")
    q.add_argument("--dry-run", action="store_true", help="say what would be removed and change nothing")
    q.add_argument("--lock", action="append", metavar="FILE",
                   help="also keep the installs this lock names (repeatable)")
    _add_json(q)
    cache = sub.add_parser("cache", help="the download cache: where, how large, prune")
    csub = cache.add_subparsers(dest="sub", parser_class=_Parser, required=True)
    csub.add_parser("dir", help="print the cache's directory")
    for name in ("du", "prune"):
        q = csub.add_parser(name)
        q.add_argument("--keep-lock", action="append", metavar="FILE",
                       help="count what this lock names as in use, and keep it (repeatable)")
        _add_json(q)
    q.add_argument("--older-than", metavar="AGE",
                   help="remove only what was last used longer ago (default 30d; s, m, h, d, w: 12h, 0s)")
    q.add_argument("--dry-run", action="store_true", help="say what would be removed and change nothing")


def _serve_parser(sub: Any, *, shown: bool) -> None:
    from superfluid.commands.serve import add_flags

    add_flags(sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API"), shown=shown)


def _question_flags(p: argparse.ArgumentParser) -> None:
    """``--<kind> V`` for each kind of question the adapters are asked (``compat --service``), in name
    order, with what it names of each runtime asked it (``Adapter.questions``)."""
    from superfluid.runtime import registry
    from superfluid.runtime.adapter import by_kind

    for kind, asked in by_kind(map(registry.get, registry.IDS)).items():
        p.add_argument(f"--{kind}", dest=f"ask_{kind}", metavar=asked[0][1].metavar,
                       help="; ".join(f"--runtime {adapter.id}: {q.flag}" for adapter, q in asked))


def _named(argv: Sequence[str] | None) -> set[str]:
    """The commands whose adapter-declared flags the tree needs: the one ``argv`` names (its first
    word), or every one (no ``argv``: the whole tree)."""
    if argv is None:
        return {"compat", "serve"}
    return {next((a for a in argv if not a.startswith("-")), "")}


def parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command tree (every command, flag and help page); with ``argv``, the line it is built to
    parse, the adapters' flags only on the command it names."""
    named = _named(argv)
    top = _Parser(prog="superfluid", add_help=False)
    top.add_argument("-h", "--help", action="store_true", help="show the commands and exit")
    top.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    sub = top.add_subparsers(dest="command", parser_class=_Parser)
    _add_json(sub.add_parser("version", help="print the version"))
    p = sub.add_parser("runtimes", help="what is installed and ready here")
    _add_json(p)
    p.add_argument("--verify", action="store_true",
                   help="also check each current install's files against its receipt (reads every file)")
    p = sub.add_parser("compat", help="what this release drives")
    _add_json(p)
    p.add_argument("--release", metavar="FILE|URL", help="read and verify another release's compat.json")
    p.add_argument("--key", action="append", metavar="FILE", help="also trust this minisign public key (repeatable)")
    p.add_argument("--require-signature", action="store_true", help="refuse a --release document with no signature")
    p.add_argument("--service", metavar="URL", help="ask this compat manifest service (or static export) which "
                   "releases drive an engine (or SUPERFLUID_MANIFEST_URL)")
    p.add_argument("--runtime", metavar="ID", help=f"the engine asked about with --service: {RUNTIME_IDS}")
    if "compat" in named:
        _question_flags(p)
    p.add_argument("--platform", metavar="P", help="with --service: on this platform (e.g. linux-x64)")
    _trust_flags(p)
    runtime = sub.add_parser("runtime", help="install and manage runtimes")
    rsub = runtime.add_subparsers(dest="sub", parser_class=_Parser, required=True)
    _install_flags(rsub.add_parser("install", help="fetch, verify and install a runtime"))
    for name, what in (("versions", "the versions a runtime installs"), ("options", "options taken on serve")):
        q = rsub.add_parser(name, help=what)
        q.add_argument("id")
        _add_json(q)
        if name == "versions":
            _for_flags(q)
            q.add_argument("--mirror", metavar="URL|DIR",
                           help="also say what this mirror's release listing offers here (or SUPERFLUID_MIRROR)")
            q.add_argument("--offline", action="store_true",
                           help="also say what the cached release listing offers here (no connection)")
    q = rsub.add_parser("check", help="probe a runtime with options: check [--model PATH] [--json] [--<option> V]...")
    q.add_argument("id")
    q.add_argument("rest", nargs=argparse.REMAINDER, help="--model PATH, --json and --<option> <value> pairs")
    q = rsub.add_parser("update", help="install the newest installable version beside the current one")
    q.add_argument("id")
    for flag in ("--offline", "--untested", "--json", "--dry-run"):
        q.add_argument(flag, action="store_true")
    q.add_argument("--mirror", metavar="URL|DIR")
    q.add_argument("--plain-http", action="store_true")
    _for_flags(q)
    q = rsub.add_parser("repair", help="reinstall an install in place (default: the current one)")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    q.add_argument("--offline", action="store_true")
    q.add_argument("--mirror", metavar="URL|DIR")
    q.add_argument("--plain-http", action="store_true")
    q.add_argument("--json", action="store_true")
    q = rsub.add_parser("remove", help="remove an install, or every install with --all")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    q.add_argument("--all", action="store_true", help="remove every install of the runtime")
    q.add_argument("--json", action="store_true")
    q = rsub.add_parser("list", help="the installs of a runtime: current, pinned, ready or broken")
    q.add_argument("id")
    _add_json(q)
    q = rsub.add_parser("use", help="pin an install as the default, or --auto to unpin")
    q.add_argument("id")
    q.add_argument("install", nargs="?")
    q.add_argument("--auto", action="store_true")
    _add_json(q)
    _lock_parsers(sub)
    _home_parsers(sub, rsub)
    _serve_parser(sub, shown="serve" in named)
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete for")
    return dress(top)


def check_help(top: argparse.ArgumentParser, runtime_id: str) -> str:
    """``runtime check <id> --help``: check's page, then the options that runtime takes."""
    from superfluid.runtime import registry

    page = find(top, "runtime check")
    assert page is not None
    text = page.format_help()
    registry.get(runtime_id)  # an unknown id is a usage error
    from superfluid.commands.check import options_help

    return text + "\n" + options_help(runtime_id)


def canonical_ids(args: argparse.Namespace) -> None:
    """An alias (``llama.cpp``) named where a runtime id is taken (``<id>``, ``--runtime``,
    ``--upgrade ID``), replaced by that runtime's id, so every command reads and writes under it."""
    from superfluid.runtime.registry import canonical

    for name in ("id", "runtime", "upgrade"):
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, canonical(value))
        elif isinstance(value, list):
            setattr(args, name, [canonical(v) if isinstance(v, str) else v for v in value])
