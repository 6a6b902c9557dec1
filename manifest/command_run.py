"""``superfluid-manifest``'s commands once the line is parsed (``--version`` loads no service).
See docs/manifest-service.md, "Running it".
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from superfluid.installer.transport.urls import path_of_file_url
from superfluid.manifest import tuf_command
from superfluid.manifest.answers import drives_cells, encode, releases_answer
from superfluid.manifest.command_line import PROG
from superfluid.manifest.export import export
from superfluid.manifest.service import Service, ServiceConfig, keys_from
from superfluid.manifest.settings import ENV_KEYS, ENV_SOURCE, ENV_TUF_KEYS, ENV_TUF_REPO, Settings, read_settings
from superfluid.manifest.sources import source_from
from superfluid.manifest.tuf_live import live_from
from superfluid.paths import flag_path
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.output import counted

__all__ = ["run", "run_line"]

_PROG = PROG


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
    sys.stderr.write(f"{_PROG}: {counted(len(index.releases), 'release')} verified, {len(index.rejected)} rejected, "
                     f"from {service.source.describe()}\n")
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
    live = (live_from(settings, repo=args.tuf_repo, keys=args.tuf_keys, expires=args.expires or None)
            if args.command == "serve" else None)
    service = Service(source, keys, config, tuf=live)
    index = service.load()
    if args.command == "serve":
        return _serve(args, service)
    service.close()
    if args.command == "export":
        written = export(index, args.out, sign=sign)
        sys.stdout.write(f"{counted(len(written), 'file')} written to {args.out} "
                         f"({counted(len(index.releases), 'release')}, {len(index.rejected)} rejected)\n")
        return 0
    if args.json:
        sys.stdout.write(encode(releases_answer(index)).decode("utf-8"))
    else:
        _report(index, sys.stdout)
    return 1 if index.rejected else 0


def run_line(args: argparse.Namespace) -> int:
    """The parsed line run in this process's environment, ``serve`` logging each request unless
    ``--quiet``."""
    level = logging.INFO if args.command == "serve" and not args.quiet else logging.WARNING
    logging.basicConfig(level=level, format=f"{_PROG}: %(message)s")
    return run(args, read_settings(os.environ))
