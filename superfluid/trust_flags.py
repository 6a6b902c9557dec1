"""``--trust-root FILE`` and ``--insecure-no-freshness``: how a command trusts a manifest service.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from superfluid.installer.trust.manifest import Trust
from superfluid.installer.trust.service import trust_for
from superfluid.runtime.errors import UsageError

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
    flag = getattr(args, "trust_root", None)
    insecure = bool(getattr(args, "insecure_no_freshness", False))
    if flag and insecure:
        raise UsageError("--trust-root and --insecure-no-freshness contradict each other: give one")
    return trust_for(flag, insecure, environ)
