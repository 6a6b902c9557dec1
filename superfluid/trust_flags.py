"""How a command trusts a manifest service, as ``--trust-root FILE`` and ``--insecure-no-freshness`` say.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

from superfluid.installer.settings import Settings
from superfluid.installer.trust.manifest import Trust
from superfluid.installer.trust.service import trust_for
from superfluid.paths import flag_path
from superfluid.runtime.kernel.errors import UsageError

__all__ = ["trust_from"]


def trust_from(trust_root: str | None, insecure: bool, settings: Settings) -> Trust:
    """The ``Trust`` the flags (``--trust-root``, ``--insecure-no-freshness``) and the settings name.

    Raises:
        UsageError: ``--trust-root`` with ``--insecure-no-freshness``; a ``--trust-root`` that is missing
            or not a file (exit 2, naming it).
    """
    if trust_root and insecure:
        raise UsageError("--trust-root and --insecure-no-freshness contradict each other: give one")
    if trust_root:
        flag_path(trust_root, "--trust-root", "TUF root file")
    return trust_for(trust_root, insecure, settings)
