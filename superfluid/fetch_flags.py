"""The network settings a command line makes for the installer (``--plain-http``)."""

from __future__ import annotations

from collections.abc import Mapping

from superfluid.installer.config import FetchConfig

__all__ = ["PLAIN_HTTP_VARIABLE", "fetch_config"]

#: ``1`` (or ``true``, ``yes``): as ``--plain-http`` on every command that takes it (docs/cli.md)
PLAIN_HTTP_VARIABLE = "SUPERFLUID_OCI_PLAIN_HTTP"


def fetch_config(*, plain_http: bool, environ: Mapping[str, str]) -> FetchConfig:
    """The network settings of a command line for the installer: plain ``http://`` to an ``oci://``
    registry not on loopback when ``--plain-http`` was given (``plain_http``) or
    ``SUPERFLUID_OCI_PLAIN_HTTP`` asks for it (read here, by the face, and handed down in the config:
    nothing is written into the environment for the installer to read back)."""
    asked = environ.get(PLAIN_HTTP_VARIABLE, "").strip().lower() in ("1", "true", "yes")
    return FetchConfig(oci_plain_http=plain_http or asked)
