"""The installer's ``Settings``, built once by a command from its flags and the environment it was started with."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from superfluid.fetch_flags import fetch_config
from superfluid.installer.settings import (
    MANIFEST_ROOT_VARIABLE,
    MIRROR_FLAG,
    MIRROR_VARIABLE,
    SIGSTORE_ROOT_VARIABLE,
    Settings,
)
from superfluid.installer.sources.github import token_from
from superfluid.installer.sources.oci.auth import auth_files
from superfluid.runtime.kernel.layout import home
from superfluid.verbosity import quiet

__all__ = ["settings_of"]


def settings_of(environ: Mapping[str, str], *, mirror: str | None = None, offline: bool = False,
                plain_http: bool = False, json_mode: bool = False, require_provenance: bool = False) -> Settings:
    """The settings of a command line: ``mirror`` (``--mirror``, else ``SUPERFLUID_MIRROR``; empty is
    unset), ``offline`` (``--offline``), ``plain_http`` (``--plain-http``, or
    ``SUPERFLUID_OCI_PLAIN_HTTP``) and ``json_mode`` (``--json``: no progress bar, nor with ``CI``
    set or ``-q``) and ``require_provenance`` (``--require-provenance``, a lock's ``provenance = "required"``),
    with every variable the installer reads: ``SUPERFLUID_HOME``, ``SUPERFLUID_GITHUB_API``,
    ``GH_TOKEN``/``GITHUB_TOKEN``, ``REGISTRY_AUTH_FILE``/``DOCKER_CONFIG``/``HOME``, ``CI``,
    ``SUPERFLUID_MANIFEST_ROOT``, ``SUPERFLUID_SIGSTORE_ROOT``. ``environ`` is kept, read-only, for the host-facts
    reader and a staged worker's environment."""
    named = environ.get("REGISTRY_AUTH_FILE") or ""
    return Settings(
        home=home(environ),
        mirror=mirror or environ.get(MIRROR_VARIABLE) or None,
        mirror_named_by=MIRROR_FLAG if mirror else MIRROR_VARIABLE,
        mirror_variable=environ.get(MIRROR_VARIABLE) or None,
        github_api=environ.get("SUPERFLUID_GITHUB_API") or "",
        github_token=token_from(environ.get("GH_TOKEN"), environ.get("GITHUB_TOKEN")),
        offline=offline,
        fetch=fetch_config(plain_http=plain_http, environ=environ),
        auth_files=tuple(str(p) for p in auth_files(named=named, docker_config=environ.get("DOCKER_CONFIG") or "",
                                                    user_home=environ.get("HOME") or "")),
        auth_file_named=bool(named),
        progress="off" if json_mode or environ.get("CI") or quiet() else "terminal",
        trust_root=environ.get(MANIFEST_ROOT_VARIABLE, "").strip() or None,
        sigstore_root=environ.get(SIGSTORE_ROOT_VARIABLE, "").strip() or None,
        require_provenance=require_provenance,
        host_environ=MappingProxyType(dict(environ)),
    )
