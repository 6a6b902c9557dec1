"""``--trust-root FILE`` and ``--insecure-no-freshness``: how a command trusts a manifest service.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from superfluid.runtime.errors import UsageError

if TYPE_CHECKING:  # the parser of every command adds these flags: it imports little
    from superfluid.installer.trust.manifest import Trust

__all__ = ["add_flags", "trust_from"]


def add_flags(p: argparse.ArgumentParser) -> None:
    """The two flags, once per parser."""
    if any(a.dest == "trust_root" for a in p._actions):
        return
    p.add_argument("--trust-root", metavar="FILE", help="the manifest service's TUF root to start trusting its "
                   "answers from, e.g. its metadata/1.root.json (or SUPERFLUID_MANIFEST_ROOT; kept in "
                   "$SUPERFLUID_HOME/trust after the first run)")
    p.add_argument("--insecure-no-freshness", action="store_true",
                   help="ask the manifest service without TUF checks: a rolled-back or frozen index is accepted")


def trust_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Trust:
    """The ``Trust`` the flags and the environment name.

    Raises:
        UsageError: ``--trust-root`` with ``--insecure-no-freshness``.
    """
    from superfluid.installer.trust.manifest import ENV_ROOT, Trust
    from superfluid.runtime.home import home

    flag = getattr(args, "trust_root", None)
    insecure = bool(getattr(args, "insecure_no_freshness", False))
    if flag and insecure:
        raise UsageError("--trust-root and --insecure-no-freshness contradict each other: give one")
    root = flag or environ.get(ENV_ROOT, "").strip() or None
    return Trust(home(environ), None if insecure else root, insecure)
