"""``superfluid-manifest``'s TUF commands and flags.

See docs/manifest-service.md, "Key handling".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from superfluid.manifest.command_line import ManifestParser, integer
from superfluid.manifest.tuf_keys import init_keys, read_keys
from superfluid.manifest.tuf_repository import (
    expiry_of,
    now_utc,
    parse_expires,
    refresh_timestamp,
    rotate_root,
    sign_export,
)
from superfluid.runtime.kernel.output import counted

__all__ = ["add_flags", "add_commands", "COMMANDS", "run", "signer_for_export"]

#: the subcommands this module runs (they read no release source)
COMMANDS = ("keys", "refresh-timestamp", "rotate-root")

_EXPIRES_HELP = ("how long ROLE's metadata is valid when signed: ROLE root, targets, snapshot or timestamp, "
                 "DURATION e.g. 2s, 30m, 12h, 7d, 4w, more than zero and at most 36500d (repeatable; defaults "
                 "root=365d targets=90d snapshot=90d timestamp=1d)")


#: the most root keys a key set may hold (each a file, each a signature on every root)
MAX_ROOT_KEYS = 64


def _expires_value(value: str) -> str:
    """An argparse ``type``: one ``ROLE=DURATION``, checked as the commands read it (kept as given).

    Raises:
        argparse.ArgumentTypeError: why it is refused, naming the value.
    """
    try:
        expiry_of(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{value!r}: {e}") from None
    return value


def _expires(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expires", action="append", default=[], metavar="ROLE=DURATION", type=_expires_value,
                   help=_EXPIRES_HELP)


def add_flags(p: argparse.ArgumentParser, *, serve: bool = False) -> None:
    """``--tuf-keys`` and ``--expires`` on ``export`` (and ``--tuf-repo`` on ``serve``)."""
    if serve:
        p.add_argument("--tuf-repo", metavar="DIR", help="keep and answer the TUF metadata of the answers in DIR "
                       "(an export the service keeps; also $SUPERFLUID_MANIFEST_TUF_REPO)")
        p.add_argument("--tuf-keys", metavar="DIR", help="with --tuf-repo: sign each new index and re-sign the "
                       "timestamp with the online keys in DIR (also $SUPERFLUID_MANIFEST_TUF_KEYS)")
    else:
        p.add_argument("--tuf-keys", metavar="DIR", help="sign the export as a TUF repository (OUT_DIR/metadata/) "
                       "with the key set in DIR (superfluid-manifest keys init)")
    _expires(p)


def add_commands(sub: Any) -> None:
    """The ``keys``, ``refresh-timestamp`` and ``rotate-root`` subcommands."""
    keys = sub.add_parser("keys", help="make a TUF key set (keys init DIR)",
                          description="The TUF key sets that sign an export's metadata (docs/manifest-service.md, "
                                      "\"Key handling\").")
    ksub = keys.add_subparsers(dest="keys_command", parser_class=ManifestParser, required=True, metavar="<command>")
    p = ksub.add_parser("init", help="make a key set in DIR: root, targets, snapshot and timestamp keys")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--root-keys", type=integer(1, MAX_ROOT_KEYS), default=1, metavar="N",
                   help=f"how many root keys, 1 to {MAX_ROOT_KEYS} (default 1)")
    p.add_argument("--root-threshold", type=integer(1, MAX_ROOT_KEYS), default=1, metavar="T",
                   help="how many of them must sign a root (default 1)")
    p = sub.add_parser("refresh-timestamp", help="re-sign only the timestamp of an export (what a cron job runs)")
    p.add_argument("--tuf-keys", required=True, metavar="DIR", help="the key set holding the timestamp key")
    _expires(p)
    p.add_argument("out", metavar="OUT_DIR")
    p = sub.add_parser("rotate-root", help="sign the next root (new keys, or a new expiry) and re-sign the index")
    p.add_argument("--tuf-keys", required=True, metavar="OLD", help="the key set the current root trusts")
    p.add_argument("--to", metavar="NEW", help="the key set the new root states (default: the same, renewed)")
    _expires(p)
    p.add_argument("out", metavar="OUT_DIR")


def signer_for_export(args: argparse.Namespace) -> Callable[[Path, Path], list[Path]] | None:
    """The ``sign`` step ``export`` runs over its staged tree, when ``--tuf-keys`` is given.

    Raises:
        UsageError: a bad ``--expires``, no key set; BadFile: a broken key set.
    """
    expiry = parse_expires(args.expires)
    if not args.tuf_keys:
        return None
    keys = read_keys(args.tuf_keys)
    return lambda stage, previous: sign_export(stage, previous, keys, expiry)


def _until(valid: Any) -> str:
    return f"{now_utc() + valid:%Y-%m-%dT%H:%M:%SZ}"


def run(args: argparse.Namespace) -> int:
    """``keys init``, ``refresh-timestamp`` or ``rotate-root``; 0 done.

    Raises:
        UsageError: a bad flag, a key missing for the step; BadFile: unreadable keys or metadata.
    """
    if args.command == "keys":
        keys = init_keys(args.dir, root_keys=args.root_keys, root_threshold=args.root_threshold)
        for role in ("root", "targets", "snapshot", "timestamp"):
            ids = ", ".join(k[:16] for k in keys.keyids(role))
            sys.stdout.write(f"{role}: {counted(len(keys.public[role]), 'key')}, threshold {keys.thresholds[role]} "
                             f"({ids})\n")
        sys.stdout.write(f"keys written to {args.dir}: keep the root-*.pem files offline once the first export "
                         "is signed\n")
        return 0
    expiry = parse_expires(args.expires)
    out = Path(args.out)  # a directory: checked with every path of the line (command_run._paths)
    if args.command == "refresh-timestamp":
        version = refresh_timestamp(out, read_keys(args.tuf_keys), expiry)
        until = _until(expiry.timestamp)
        sys.stdout.write(f"timestamp version {version} signed in {out / 'metadata'}, valid until {until}\n")
        return 0
    old = read_keys(args.tuf_keys)
    version = rotate_root(out, old, read_keys(args.to) if args.to else old, expiry)
    sys.stdout.write(f"root version {version} signed in {out / 'metadata'}; the index re-signed with "
                     f"{args.to or args.tuf_keys}\n")
    return 0
