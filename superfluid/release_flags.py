"""The words of the flags that read another release's compat document (``--for``, ``--key``...), not their reading.

See docs/architecture.md, "Where a new thing goes".
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

# --for, --key, --require-signature, and how the manifest service is trusted (--trust-root,
# --insecure-no-freshness). Reading them is for_release's and trust_flags', which a command imports
# where it reads them (runtime install only in commands/install_for.py): a plain install never
# loads the signature and TUF machinery.

__all__ = ["ForFlags", "add_flags", "add_trust_flags", "flags_of", "FOR_VARIABLE"]

#: the release to plan for when ``--for`` is not given (docs/cli.md)
FOR_VARIABLE = "SUPERFLUID_FOR"


@dataclass(frozen=True, slots=True, kw_only=True)
class ForFlags:
    """What ``add_flags`` adds, as a command line gave it (``for_release.release_for`` reads them)."""

    value: str | None = None  # --for as given; None: SUPERFLUID_FOR, else this release
    keys: tuple[str, ...] = ()  # --key FILE, each: more minisign public keys to trust
    require_signature: bool = False  # --require-signature
    trust_root: str | None = None  # --trust-root FILE, for --for VERSION from a manifest service
    insecure: bool = False  # --insecure-no-freshness


def add_flags(p: argparse.ArgumentParser) -> None:
    """``--for``, ``--key`` and ``--require-signature`` on a command that plans."""
    p.add_argument("--for", dest="for_", metavar="FILE|URL|VERSION",
                   help=f"plan for another superfluid release: its compat.json, or its version (or {FOR_VARIABLE})")
    if not any(a.dest == "key" for a in p._actions):
        p.add_argument("--key", action="append", metavar="FILE",
                       help="also trust this minisign public key for --for (repeatable)")
    if not any(a.dest == "require_signature" for a in p._actions):
        p.add_argument("--require-signature", action="store_true", help="refuse a --for document with no signature")
    add_trust_flags(p)  # --for VERSION asks the manifest service


def flags_of(args: argparse.Namespace) -> ForFlags:
    """What ``add_flags`` added to a parser, as ``args`` (its parse) holds it."""
    return ForFlags(value=args.for_, keys=tuple(args.key or ()), require_signature=args.require_signature,
                    trust_root=args.trust_root, insecure=args.insecure_no_freshness)


def add_trust_flags(p: argparse.ArgumentParser) -> None:
    """``--trust-root`` and ``--insecure-no-freshness``, once per parser."""
    if any(a.dest == "trust_root" for a in p._actions):
        return
    p.add_argument("--trust-root", metavar="FILE", help="the manifest service's TUF root to start trusting its "
                   "answers from, e.g. its metadata/1.root.json (or SUPERFLUID_MANIFEST_ROOT; kept in "
                   "$SUPERFLUID_HOME/trust after the first run)")
    p.add_argument("--insecure-no-freshness", action="store_true",
                   help="ask the manifest service without TUF checks: a rolled-back or frozen index is accepted")
