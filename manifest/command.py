"""``superfluid-manifest``: the compat manifest service's command line.

See docs/manifest-service.md, "Running it".
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from superfluid.installer.transport.urls import path_of_file_url
from superfluid.manifest import tuf_command
from superfluid.manifest.answers import drives_cells, encode, releases_answer
from superfluid.manifest.command_line import MAX_SECONDS, ManifestParser, integer, seconds
from superfluid.manifest.export import export
from superfluid.manifest.service import DEFAULT_MAX_AGE, Service, ServiceConfig, keys_from
from superfluid.manifest.settings import ENV_KEYS, ENV_SOURCE, ENV_TUF_KEYS, ENV_TUF_REPO, Settings, read_settings
from superfluid.manifest.sources import source_from
from superfluid.paths import flag_path
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError, guarded
from superfluid.runtime.kernel.output import error_code, error_doc, print_json
from superfluid.runtime.kernel.version import VERSION

__all__ = ["main"]

_PROG = "superfluid-manifest"


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


def _paths(args: argparse.Namespace, settings: Settings) -> None:
    """Every path the line (or the environment, named as its variable) gives, checked before anything
    is read or written: each is what its flag asks (``superfluid.paths.flag_path``; docs/cli.md, "Exit
    codes").

    Raises:
        UsageError: a path missing, or not of the kind asked (a FIFO, a device, a file for a directory...).
    """
    wants: list[tuple[str | None, str, str, bool]] = []  # (value, flag, kind, must exist)
    if args.command in ("serve", "export", "check"):
        spec = args.source or settings.source
        if spec and not spec.startswith("github:") and ("://" not in spec or spec.startswith("file://")):
            wants.append((path_of_file_url(spec) if spec.startswith("file://") else spec,
                          "--source" if args.source else ENV_SOURCE, "directory of release folders", True))
        wants += [(k, ENV_KEYS, "public key", True) for k in settings.keys]
        wants += [(k, "--key", "public key", True) for k in args.key]
    if args.command == "serve":
        wants.append((args.tuf_repo or settings.tuf_repo, "--tuf-repo" if args.tuf_repo else ENV_TUF_REPO,
                      "TUF repository directory", False))
        wants.append((args.tuf_keys or settings.tuf_keys, "--tuf-keys" if args.tuf_keys else ENV_TUF_KEYS,
                      "key set directory", True))
    if args.command in ("export", "refresh-timestamp", "rotate-root"):
        wants.append((args.tuf_keys, "--tuf-keys", "key set directory", True))
        wants.append((args.out, "", "export directory", args.command != "export"))
    if args.command == "rotate-root":
        wants.append((args.to, "--to", "key set directory", True))
    if args.command == "keys":
        wants.append((args.dir, "", "key set directory", False))
    for value, flag, kind, must_exist in wants:
        if value:
            flag_path(value, flag, kind, must_exist=must_exist)


def _setup(args: argparse.Namespace, settings: Settings) -> tuple[Any, Any]:
    """The source and the trusted keys the flags and the environment (``settings``) name (their paths
    checked by ``_paths``).

    Raises:
        UsageError: no source; BadFile/BadKey: a key file.
    """
    spec = args.source or settings.source
    if not spec:
        raise UsageError(f"--source is missing: name a directory of release folders, a mirror URL or "
                         f"github:OWNER/REPO (or set {ENV_SOURCE}) (see '{_PROG} {args.command} --help')")
    return source_from(spec, settings), keys_from([*settings.keys, *args.key])


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)


def _report(index: Any, out: Any) -> None:
    """The table of verified releases, then the rejected ones with their reasons."""
    rows = [["VERSION", "NAME", "SIGNED BY", *(rid.upper() for rid in registry.IDS)]]

    for r in index.releases:
        rows.append([r.version, r.name, r.main.verdict.key_id or "not checked", *drives_cells(r)])
    out.write(_table(rows))
    for r in index.rejected:
        out.write(f"rejected {r.version or '?'} ({r.where}): {r.reason}\n")
    if not index.releases and not index.rejected:
        out.write("no release found in the source: name a directory of release folders (as ci/pack writes "
                  "them), a mirror URL or github:OWNER/REPO with --source\n")
    if not index.keys:
        out.write("no trusted keys: signatures were not checked (name one with --key)\n")


def _serve(args: argparse.Namespace, service: Any) -> int:
    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        request_queue_size = 256  # connections waiting to be accepted (the default 5 refuses a burst)

    quiet = args.quiet

    class Handler(WSGIRequestHandler):
        def log_message(self, format: str, *a: Any) -> None:  # noqa: A002 - the stdlib's name
            if not quiet:
                sys.stderr.write(f"{self.address_string()} {format % a}\n")

    try:
        httpd = make_server(args.host, args.port, service, server_class=Server, handler_class=Handler)
    except OSError as e:
        raise SuperfluidError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    host, port = args.host, httpd.server_address[1]

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    index = service.current().index
    sys.stderr.write(f"{_PROG}: {len(index.releases)} releases verified, {len(index.rejected)} rejected, from "
                     f"{service.source.describe()}\n")
    for r in index.rejected:
        sys.stderr.write(f"{_PROG}: rejected {r.version or '?'} ({r.where}): {r.reason}\n")
    sys.stderr.write(f"{_PROG}: serving on http://{host}:{port}/\n")
    sys.stderr.flush()
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
        service.close()
    return 0


def run(args: argparse.Namespace, settings: Settings) -> int:
    """One subcommand; 0, or 1 when ``check`` found a rejected release.

    Raises:
        UsageError, SuperfluidError: as the subcommands say.
    """
    _paths(args, settings)
    if args.command in tuf_command.COMMANDS:
        return tuf_command.run(args)
    sign = tuf_command.signer_for_export(args) if args.command == "export" else None
    source, keys = _setup(args, settings)
    config = ServiceConfig(ttl=args.ttl, max_age=args.max_age)
    live = tuf_command.live_for_serve(args, settings) if args.command == "serve" else None
    service = Service(source, keys, config, tuf=live)
    index = service.load()
    if args.command == "serve":
        return _serve(args, service)
    service.close()
    if args.command == "export":
        written = export(index, args.out, sign=sign)
        sys.stdout.write(f"{len(written)} files written to {args.out} ({len(index.releases)} releases, "
                         f"{len(index.rejected)} rejected)\n")
        return 0
    if args.json:
        sys.stdout.write(encode(releases_answer(index)).decode("utf-8"))
    else:
        _report(index, sys.stdout)
    return 1 if index.rejected else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``superfluid-manifest``: 0 done; 1 a run-time failure or a rejected release (check); 2 usage."""
    args_in = list(sys.argv[1:] if argv is None else argv)

    def main_line() -> int:
        args = _parse(args_in)
        level = logging.INFO if args.command == "serve" and not args.quiet else logging.WARNING
        logging.basicConfig(level=level, format=f"{_PROG}: %(message)s")
        return run(args, read_settings(os.environ))

    try:
        if _wants_json(args_in):
            return _json_failures(main_line)
        return guarded(_PROG, main_line)
    except KeyboardInterrupt:
        sys.stderr.write(f"{_PROG}: interrupted\n")
        return 130


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
        code = 2 if isinstance(e, UsageError) else 1
        sys.stderr.write(f"{_PROG}: {e}\n")
        print_json(error_doc(error_code(e), str(e), code, fixes=e.fixes, advice=e.advice))
        return code


if __name__ == "__main__":
    sys.exit(main())
