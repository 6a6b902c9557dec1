"""What the manifest's processes read of the environment, read once at their main (``read_settings``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from superfluid.installer.settings import Settings as InstallerSettings
from superfluid.installer.sources.github import token_from
from superfluid.runtime.kernel.layout import home

__all__ = ["Settings", "read_settings", "ENV_SOURCE", "ENV_KEYS", "ENV_TTL", "ENV_MAX_AGE", "ENV_TUF_REPO",
           "ENV_TUF_KEYS", "ENV_EXPIRES", "ENV_KEY", "ENV_KEY_FILE", "ENV_SOURCE_DATE_EPOCH", "ENV_WORKFLOW_REF"]

ENV_SOURCE = "SUPERFLUID_MANIFEST_SOURCE"
ENV_KEYS = "SUPERFLUID_MANIFEST_KEYS"
ENV_TTL = "SUPERFLUID_MANIFEST_TTL"
ENV_MAX_AGE = "SUPERFLUID_MANIFEST_MAX_AGE"
ENV_TUF_REPO = "SUPERFLUID_MANIFEST_TUF_REPO"
ENV_TUF_KEYS = "SUPERFLUID_MANIFEST_TUF_KEYS"
ENV_EXPIRES = "SUPERFLUID_MANIFEST_EXPIRES"
#: the secret key's content (how a CI secret arrives)
ENV_KEY = "SUPERFLUID_SIGNING_KEY"
#: the path of the secret key file
ENV_KEY_FILE = "SUPERFLUID_SIGNING_KEY_FILE"
#: reproducible builds: the time a release's signatures and bundles state
ENV_SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"
#: GitHub Actions: the workflow run's OWNER/NAME/.github/workflows/FILE@REF (ci/pack --attested states it)
ENV_WORKFLOW_REF = "GITHUB_WORKFLOW_REF"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The environment as the manifest's commands and service use it; each value as set, ``""`` (or
    empty, or None) when unset. Values are checked where they are used, so that a command that does
    not use one is never refused for it."""

    #: what the installer's release sources (``github:``, a mirror URL) are given: the home (whose
    #: ``cache/`` keeps listings and assets), ``SUPERFLUID_GITHUB_API``, ``GH_TOKEN``/``GITHUB_TOKEN``;
    #: no mirror (``SUPERFLUID_MIRROR`` is not read: a source
    #: names its own place)
    installer: InstallerSettings = field(repr=False)
    source: str = ""  # SUPERFLUID_MANIFEST_SOURCE, stripped: the source --source defaults to
    keys: tuple[str, ...] = ()  # SUPERFLUID_MANIFEST_KEYS, split on os.pathsep, blank parts left out
    ttl: str = ""  # SUPERFLUID_MANIFEST_TTL, stripped: seconds between looks at the source
    max_age: str = ""  # SUPERFLUID_MANIFEST_MAX_AGE, stripped: Cache-Control max-age, seconds
    tuf_repo: str | None = None  # SUPERFLUID_MANIFEST_TUF_REPO, stripped
    tuf_keys: str | None = None  # SUPERFLUID_MANIFEST_TUF_KEYS, stripped
    expires: tuple[str, ...] = ()  # SUPERFLUID_MANIFEST_EXPIRES, split on ",", blank parts left out
    signing_key_file: str = ""  # SUPERFLUID_SIGNING_KEY_FILE
    signing_key: str = field(default="", repr=False)  # SUPERFLUID_SIGNING_KEY: a secret, never shown
    source_date_epoch: str = ""  # SOURCE_DATE_EPOCH
    workflow_ref: str = ""  # GITHUB_WORKFLOW_REF, stripped
    #: the whole environment as read, what the pack step's child processes inherit (less the signing
    #: key's variables); it holds credentials, so it is never shown
    environment: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


def read_settings(environ: Mapping[str, str]) -> Settings:
    """The settings ``environ`` holds: called once, by a main or the WSGI application's factory."""
    copy = MappingProxyType(dict(environ))
    installer = InstallerSettings(home=home(copy), github_api=copy.get("SUPERFLUID_GITHUB_API") or "",
                                  github_token=token_from(copy.get("GH_TOKEN"), copy.get("GITHUB_TOKEN")),
                                  host_environ=copy)
    return Settings(
        installer=installer,
        source=environ.get(ENV_SOURCE, "").strip(),
        keys=tuple(p for p in environ.get(ENV_KEYS, "").split(os.pathsep) if p.strip()),
        ttl=environ.get(ENV_TTL, "").strip(),
        max_age=environ.get(ENV_MAX_AGE, "").strip(),
        tuf_repo=environ.get(ENV_TUF_REPO, "").strip() or None,
        tuf_keys=environ.get(ENV_TUF_KEYS, "").strip() or None,
        expires=tuple(e for e in environ.get(ENV_EXPIRES, "").split(",") if e.strip()),
        signing_key_file=environ.get(ENV_KEY_FILE) or "",
        signing_key=environ.get(ENV_KEY) or "",
        source_date_epoch=environ.get(ENV_SOURCE_DATE_EPOCH, ""),
        workflow_ref=environ.get(ENV_WORKFLOW_REF, "").strip(),
        environment=copy,
    )
