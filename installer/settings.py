"""What a command line and its environment settle for the installer: one frozen record, built once by the face."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from superfluid.installer.config import DEFAULT_GITHUB_API, FetchConfig

__all__ = ["MANIFEST_ROOT_VARIABLE", "MIRROR_FLAG", "MIRROR_VARIABLE", "SIGSTORE_ROOT_VARIABLE", "ProgressMode",
           "Settings"]

#: who may name a mirror, as messages name them
MIRROR_FLAG = "--mirror"
MIRROR_VARIABLE = "SUPERFLUID_MIRROR"
#: the manifest service's TUF root to start trusting from, unless ``--trust-root`` names one
MANIFEST_ROOT_VARIABLE = "SUPERFLUID_MANIFEST_ROOT"
#: the Sigstore trusted root an asset's bundle is verified under, instead of the public Sigstore's
SIGSTORE_ROOT_VARIABLE = "SUPERFLUID_SIGSTORE_ROOT"

#: ``"terminal"``: a bar on stderr when it is a terminal; ``"off"``: none (``CI`` set, or ``--json``)
ProgressMode = Literal["terminal", "off"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything the installer was once given as ``environ``, read by the face (``superfluid/settings.py``)
    from the flags and the environment, and handed down: below the face nothing reads the environment
    but the host-facts reader, which is given ``host_environ``.

    Raises:
        ValueError: ``mirror_named_by`` is neither ``--mirror`` nor ``SUPERFLUID_MIRROR``.
    """

    home: str  # the home's path: SUPERFLUID_HOME, else ~/.superfluid (layout.home)
    mirror: str | None = None  # the mirror releases are read from as given (a URL, a folder); None: GitHub
    mirror_named_by: str = MIRROR_FLAG  # who named it, for messages: --mirror, else SUPERFLUID_MIRROR
    # SUPERFLUID_MIRROR as set, even when --mirror names another: a superfluid release's own compat
    # document is read from it (for_release), never from --mirror
    mirror_variable: str | None = None
    github_api: str = ""  # SUPERFLUID_GITHUB_API as set; "": DEFAULT_GITHUB_API (then https only)
    github_token: str | None = None  # GH_TOKEN, else GITHUB_TOKEN (as the gh command orders them)
    offline: bool = False  # --offline: the cache alone, no connection opened
    fetch: FetchConfig = field(default_factory=FetchConfig)  # network limits and --plain-http
    auth_files: tuple[str, ...] = ()  # the files a registry login is looked up in, in order (oci/auth.py)
    auth_file_named: bool = False  # REGISTRY_AUTH_FILE named auth_files' one file (a 401 names it if absent)
    progress: ProgressMode = "off"  # how downloads show their progress
    trust_root: str | None = None  # SUPERFLUID_MANIFEST_ROOT: the manifest service's root, unless --trust-root
    # SUPERFLUID_SIGSTORE_ROOT: the Sigstore trusted root (a trusted_root.json) assets' bundles are verified
    # under; None: the public Sigstore's, as the installed sigstore-python carries it
    sigstore_root: str | None = None
    # --require-provenance (or a lock's provenance = "required"): an asset without a bundle is refused
    require_provenance: bool = False
    # the environment the command was started with, read-only: what the host-facts reader is given
    # (the SUPERFLUID_HOST_* overrides) and what a staged worker's environment is scrubbed from
    host_environ: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.mirror_named_by not in (MIRROR_FLAG, MIRROR_VARIABLE):
            raise ValueError(f"Settings.mirror_named_by must be {MIRROR_FLAG} or {MIRROR_VARIABLE}, "
                             f"got {self.mirror_named_by!r}")

    @property
    def api(self) -> str:
        """The GitHub API base releases are listed from: ``github_api``, else ``DEFAULT_GITHUB_API``."""
        return self.github_api or DEFAULT_GITHUB_API
