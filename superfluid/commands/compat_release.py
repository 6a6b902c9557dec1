"""``superfluid compat --release FILE|URL``: another release's compat document, its signature verified
before it is read (docs/cli.md, "`superfluid compat`")."""

from __future__ import annotations

import argparse
import sys

from superfluid.compat_line import key_flags, refuse_service_flags, show_document
from superfluid.release_document import read_release

# Its flags and page are compat's; the dispatch runs this module for --release (commands/compat.py's
# runs_in), so that a plain compat never loads the signature checks.

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """0 --release was read (verified, or unsigned with a warning); 1 it could not be read, verified
    or validated; 2 a bad flag."""
    refuse_service_flags(args)
    keys = key_flags(args)
    doc, verdict, _ = read_release(args.release, keys=keys, require_signature=args.require_signature)
    show_document(doc, verdict, {}, as_json=args.json)
    if verdict.signature == "unsigned":
        sys.stderr.write(f"superfluid: warning: {args.release} is unsigned (no .minisig beside it): its content "
                         f"is not verified; --require-signature refuses it\n")
    return 0
