"""Where a compat manifest service is (a URL, or a static export's folder) and how far a command trusts it.

See docs/manifest-service.md, "The client".
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from superfluid.installer.settings import Settings
from superfluid.installer.trust.manifest import Trust
from superfluid.runtime.kernel.errors import UsageError

__all__ = ["ENV_URL", "service_base", "trust_for"]

#: the manifest service a command asks when none is named (``--service``)
ENV_URL = "SUPERFLUID_MANIFEST_URL"


def service_base(url: str, named: str = "--service") -> str:
    """The service's base URL, ending in ``/``; a directory (a static export) becomes a ``file://``
    URL. ``named`` is how the user gave it, for the message (``SUPERFLUID_MANIFEST_URL``).

    Raises:
        UsageError: another scheme, or a path that is no directory.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("http", "https", "file"):
        return url if url.endswith("/") else url + "/"
    if "://" in url:
        raise UsageError(f"{named} {url}: give an http(s):// URL or a directory holding a static export")
    if not os.path.isdir(url):
        raise UsageError(f"{named} {url}: no such directory (give the service's http(s):// URL)")
    return Path(url).resolve().as_uri() + "/"


def trust_for(root: str | None, insecure: bool, settings: Settings) -> Trust:
    """The ``Trust`` of a command: the root it names (``--trust-root``), else ``SUPERFLUID_MANIFEST_ROOT``
    (``settings.trust_root``), else the one kept in the home; none at all when it asks unchecked
    (``--insecure-no-freshness``)."""
    named = root or settings.trust_root
    return Trust(settings.home, None if insecure else named, insecure)
