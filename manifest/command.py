"""``superfluid-manifest``: the compat manifest service's command line.

See docs/manifest-service.md, "Running it".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from superfluid.manifest import tuf_command
from superfluid.manifest.command_line import DEFAULT_MAX_AGE, MAX_SECONDS, PROG, ManifestParser, integer, seconds
from superfluid.runtime.kernel.errors import SuperfluidError, guarded
from superfluid.runtime.kernel.exits import exit_code
from superfluid.runtime.kernel.output import error_code, error_doc, print_json
from superfluid.runtime.kernel.version import VERSION

# A line is parsed here and run by ``command_run``, imported when a line names a command: ``--version``
# (--help, a usage error) loads neither the service nor the installer's sources (0.32 s on a loaded
# machine when it did, where ``superfluid --version`` is 0.07 s; benchmarks/bench_cli.py).

__all__ = ["main"]

_PROG = PROG


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", metavar="SRC", help="a directory of release folders (as ci/pack writes them), a "
                   "mirror URL (https://HOST/ROOT/OWNER/REPO/) or github:OWNER/REPO (default: "
                   "$SUPERFLUID_MANIFEST_SOURCE)")
    p.add_argument("--key", action="append", default=[], metavar="PUB",
                   help="trust this minisign public key (repeatable; also $SUPERFLUID_MANIFEST_KEYS, ':'-separated); "
                        "with any key, every release must be signed")


def _page(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=summary[:1].upper() + summary[1:]
                                                     + ".")
    return parser


def _parser() -> argparse.ArgumentParser:
    top = ManifestParser(prog=_PROG,
                         description="The compat manifest service: which superfluid release drives an engine.")
    top.add_argument("-V", "--version", action="version", version=f"{_PROG} {VERSION}")
    sub = top.add_subparsers(dest="command", parser_class=ManifestParser, required=True, metavar="<command>")
    top.set_defaults(keys_command=None, ttl=None, max_age=DEFAULT_MAX_AGE)  # what the dispatch reads of every line
    p = _page(sub, "serve", "answer over HTTP (the standard library's server, for local use)")
    _common(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=integer(0, 65535), default=8750, metavar="N",
                   help="port, 0 to 65535 (default 8750; 0: any free port)")
    p.add_argument("--ttl", type=seconds, metavar="S", help="seconds between looks at the source for changes "
                   f"(default 1 for a directory, 60 for a URL; at most {MAX_SECONDS})")
    p.add_argument("--max-age", type=integer(0, MAX_SECONDS), default=DEFAULT_MAX_AGE, metavar="S",
                   help=f"Cache-Control max-age of answers, whole seconds (default {DEFAULT_MAX_AGE}; at most "
                        f"{MAX_SECONDS})")
    p.add_argument("--quiet", action="store_true", help="log no request")
    tuf_command.add_flags(p, serve=True)
    p = _page(sub, "export", "write every answer as a static file under OUT_DIR")
    _common(p)
    tuf_command.add_flags(p)
    p.add_argument("out", metavar="OUT_DIR")
    p = _page(sub, "check", "verify every release and print the table (exit 1 if any is rejected)")
    _common(p)
    p.add_argument("--json", action="store_true", help="print /v1/releases's answer")
    tuf_command.add_commands(sub)
    for name, page in _PAGES.items():
        found = top
        for word in name.split():
            found = next(a for a in found._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        found.formatter_class = argparse.RawDescriptionHelpFormatter
        found.epilog = _epilog(*page)
    top.formatter_class = argparse.RawDescriptionHelpFormatter
    top.epilog = _epilog(tuple(dict.fromkeys(e for examples, _ in _PAGES.values() for e in examples[:1])), _EXITS)
    return top


#: what each subcommand's help ends with: examples, then the exit codes (docs/manifest-service.md)
_EXITS = ((0, "done"), (1, "the source cannot be read, or (check) a release is rejected"),
          (2, "a usage error: no source, a --key that is not a file, a bad flag, a key set that lacks a key"))
_PAGES: dict[str, tuple[tuple[str, ...], tuple[tuple[int, str], ...]]] = {
    "serve": ((f"{_PROG} serve --source ./releases --key release.pub",
               f"{_PROG} serve --source ./releases --port 0 --quiet"), _EXITS),
    "export": ((f"{_PROG} export --source ./releases --key release.pub ./site",
                f"{_PROG} export --source ./releases --tuf-keys /secure/tuf-keys ./site"), _EXITS),
    "check": ((f"{_PROG} check --source ./releases --key release.pub",
               f"{_PROG} check --source github:OWNER/REPO --json"), _EXITS),
    "keys": ((f"{_PROG} keys init /secure/tuf-keys",),
             ((0, "written"), (1, "a filesystem fault"), (2, "a usage error (no command: keys init DIR), or DIR holds "
                                                              "a key set already"))),
    "keys init": ((f"{_PROG} keys init /secure/tuf-keys",
                   f"{_PROG} keys init /secure/tuf-keys-2 --root-keys 3 --root-threshold 2"),
                  ((0, "written"), (1, "a filesystem fault"), (2, "a usage error, or DIR holds a key set already"))),
    "refresh-timestamp": ((f"{_PROG} refresh-timestamp --tuf-keys /etc/superfluid/tuf-timestamp ./site",),
                          ((0, "re-signed"), (1, "the export's metadata does not read"),
                           (2, "a usage error, or the key set lacks the timestamp key"))),
    "rotate-root": ((f"{_PROG} rotate-root --tuf-keys /secure/tuf-keys --to /secure/tuf-keys-2 ./site",),
                    ((0, "signed"), (1, "the export's metadata does not read"),
                     (2, "a usage error, or a key set the root does not trust"))),
}


def _epilog(examples: tuple[str, ...], exits: tuple[tuple[int, str], ...]) -> str:
    return "\n".join(["examples:", *(f"  {e}" for e in examples), "", "exit codes:",
                      *(f"  {code}  {what}" for code, what in exits)])


def _parse(argv: list[str]) -> argparse.Namespace:
    """The command line; an unknown argument is refused by the subcommand it was given to, whose
    ``--help`` the message then points at.

    Raises:
        UsageError: a bad command line.
    """
    top = _parser()
    args, extra = top.parse_known_args(argv)
    if extra:
        found = top
        for word in (args.command, args.keys_command):
            sub = next((a for a in found._actions if isinstance(a, argparse._SubParsersAction)), None)
            if sub is None or word is None:
                break
            found = sub.choices[word]
        found.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """``superfluid-manifest``: 0 done; 1 a run-time failure or a rejected release (check); 2 usage."""
    args_in = list(sys.argv[1:] if argv is None else argv)

    def main_line() -> int:
        args = _parse(args_in)
        runs: Any = import_module("superfluid.manifest.command_run")  # the commands, once the line is good
        return int(runs.run_line(args))

    try:
        if _wants_json(args_in):
            return _json_failures(main_line)
        return guarded(_PROG, main_line)
    except KeyboardInterrupt:
        sys.stderr.write(f"{_PROG}: interrupted\n")
        return exit_code(KeyboardInterrupt())


def _wants_json(argv: Sequence[str]) -> bool:
    """The line asked for ``--json`` (before any ``--``), so its failures are JSON too."""
    words = list(argv)
    return "--json" in (words[: words.index("--")] if "--" in words else words)


def _json_failures(main_line: Any) -> int:
    """``main_line()`` for a line that asked for ``--json``: a failure is also the face's JSON error
    (``{"error": {"code", "message", "exit"}}``, schema ``error``) on stdout."""
    try:
        code: int = main_line()
        return code
    except SuperfluidError as e:
        code = exit_code(e)
        sys.stderr.write(f"{_PROG}: {e}\n")
        print_json(error_doc(error_code(e), str(e), code, fixes=e.fixes, advice=e.advice))
        return code


if __name__ == "__main__":
    sys.exit(main())
