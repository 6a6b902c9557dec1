"""How a command trusts a manifest service, as ``--trust-root FILE`` and ``--insecure-no-freshness`` say.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from superfluid.installer.trust.manifest import Trust
from superfluid.installer.trust.service import trust_for
from superfluid.runtime.kernel.errors import UsageError

__all__ = ["trust_from"]


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
