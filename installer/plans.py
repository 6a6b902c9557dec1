"""The facts the installer passes around: a request, the plans the resolver proposes, and the
small shared rules about versions, backends and install names (SPEC §3, §4, §6.4).

Frozen dataclasses with ``to_json`` (STYLE practice 7); no I/O. The resolver (``resolver``) makes
plans, the digest policy (``digests``) fixes what each asset must hash to, the workflow
(``install``) carries them out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from superfluid.runtime.errors import SuperfluidError, UsageError
from superfluid.runtime.ordering import backend_family

__all__ = [
    "CHOSEN_BY",
    "DIGEST_SOURCES",
    "AssetLike",
    "ReleaseLike",
    "NotInstallable",
    "DigestConflict",
    "Request",
    "PlanAsset",
    "Plan",
    "version_key",
    "backend_family",
    "backend_rank",
    "is_local",
    "install_name",
]

#: how a plan was chosen, as the receipt records it (SPEC §5.4)
CHOSEN_BY = ("abi", "line", "tested", "pin", "untested", "from")
#: where an asset's expected digest comes from, strongest first
DIGEST_SOURCES = ("pin", "flag", "release", "api", "computed")

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_INSTALL_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*$")
_BACKEND_RANK = {"metal": 0, "cuda": 1, "rocm": 2, "vulkan": 3, "sycl": 4, "openvino": 5, "cpu": 9}


# -- facts ----------------------------------------------------------------


class AssetLike(Protocol):
    """One asset of a listed release (``github.Asset`` has these)."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def size(self) -> int | None: ...
    @property
    def digest(self) -> str | None: ...  # the API's "sha256:<hex>", when the listing gives one


class ReleaseLike(Protocol):
    """One listed release, drafts already dropped by the source (``github.Release`` has these)."""

    @property
    def tag(self) -> str: ...
    @property
    def prerelease(self) -> bool: ...
    @property
    def assets(self) -> Sequence[AssetLike]: ...


class NotInstallable(SuperfluidError):
    """Nothing the request names installs here; the message says why and what would instead."""

    def __init__(self, message: str, *, instead: str | None = None, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.instead = instead  # the version that would install instead, when there is one


class DigestConflict(SuperfluidError):
    """``--sha256`` disagrees with a pin or with what the release states; never silently resolved."""

    def __init__(self, name: str, flag: str, other: str, other_source: str) -> None:
        super().__init__(
            f"{name}: --sha256 {flag} disagrees with {other_source} {other}",
            fix="a pin is never overridden; drop --sha256, or check the digest you passed",
        )
        self.name = name
        self.flag = flag
        self.other = other
        self.other_source = other_source


@dataclass(frozen=True)
class Request:
    """What the user asked: ``superfluid runtime install <id> [flags]`` (SPEC §6.4)."""

    id: str
    version: str | None = None
    backend: str | None = None
    from_: str | None = None
    sha256: str | None = None
    untested: bool = False

    @classmethod
    def parse(cls, runtime_id: str, *, version: str | None = None, backend: str | None = None,
              from_: str | None = None, sha256: str | None = None, untested: bool = False) -> Request:
        """A request with its flags normalised: ``v`` dropped from a version, backend and digest
        lower-cased.

        Raises:
            UsageError: a malformed ``--sha256``, ``--version`` or ``--backend`` (exit 2).
        """
        if version is not None:
            version = version.strip()
            if version[:1] in ("v", "V") and version[1:2].isdigit():
                version = version[1:]
            if not version or not _INSTALL_NAME.match(version):
                raise UsageError(f"--version {version!r} is not a version (e.g. 0.4.0, b11642)")
        if backend is not None:
            backend = backend.strip().lower()
            if not backend or not _INSTALL_NAME.match(backend):
                raise UsageError(f"--backend {backend!r} is not a backend (e.g. cpu, cuda, metal, vulkan)")
        if sha256 is not None:
            sha256 = sha256.strip().lower().removeprefix("sha256:")
            if not _HEX64.match(sha256):
                raise UsageError(f"--sha256 {sha256!r} is not a SHA-256 (64 hexadecimal digits)")
        if from_ is not None and not from_.strip():
            raise UsageError("--from needs a path or a URL")
        return cls(runtime_id, version, backend, from_, sha256, untested)


@dataclass(frozen=True)
class PlanAsset:
    """One file a plan fetches, and the digest it must have (SPEC §8.2).

    ``sha256`` is the expected digest once known (``None`` for a local file without one, or while
    the release's ``.sha256`` is still to be read: ``sidecar`` names it); ``digest_source`` says
    which statement it is (``DIGEST_SOURCES``); ``checked`` every statement it was agreed against.
    """

    name: str
    url: str
    sha256: str | None
    size: int | None
    digest_source: str
    checked: tuple[str, ...] = ()
    sidecar: str | None = None  # URL of <name>.sha256, when the release publishes one to read
    api_sha256: str | None = None  # the listing's digest, when given
    pin: str | None = None  # the recipe's digest, when pinned

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "url": self.url, "sha256": self.sha256, "size": self.size,
                               "digest_source": self.digest_source, "checked": list(self.checked)}
        if self.sidecar:
            out["sidecar"] = self.sidecar
        return out


@dataclass(frozen=True)
class Plan:
    """One install the resolver proposes; plans come as an ordered fallback list."""

    id: str
    version: str
    backend: str
    assets: tuple[PlanAsset, ...]
    tested: bool
    chosen_by: str
    abi: int | None
    why: str
    platform: str = ""
    extra: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def install(self) -> str:
        """The install directory name, ``<version>-<backend>``."""
        return install_name(self.version, self.backend)

    @property
    def size(self) -> int:
        return sum(a.size or 0 for a in self.assets)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "version": self.version, "backend": self.backend, "install": self.install,
            "assets": [a.to_json() for a in self.assets], "tested": self.tested, "chosen_by": self.chosen_by,
            "abi": self.abi, "why": self.why, "platform": self.platform,
        }
        if self.extra is not None:
            out["extra"] = dict(self.extra)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


# -- small shared rules ----------------------------------------------------------------------------


def version_key(version: str) -> tuple[Any, ...]:
    """Order versions: PEP 440 where the string is one (``0.3.1`` < ``0.4.0``, ``0.4.0rc1`` <
    ``0.4.0``), else by its runs of digits (``b11284`` < ``b11642``)."""
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(version))
    except InvalidVersion:
        digits = re.findall(r"[0-9]+", version)
        return (1, Version(".".join(str(int(d)) for d in digits))) if digits else (0, version)


def backend_rank(backend: str) -> int:
    """SPEC §3: metal 0, cuda 1, rocm 2, vulkan 3, sycl 4, openvino 5, other 8, cpu 9 (by family,
    in any case): the resolver's order of bundles and the store's order of installs."""
    return _BACKEND_RANK.get(backend_family(backend).lower(), 8)


def is_local(source: str) -> bool:
    """A path on this machine: ``file://…`` or any string without ``://``."""
    return source.startswith("file://") or "://" not in source


def install_name(version: str, backend: str) -> str:
    """``<version>-<backend>`` (SPEC §3), refused when it could not be a directory name.

    Raises:
        UsageError: the name would start with a dot or hold a character other than letters,
            digits, ``.``, ``-``, ``_``, ``+``.
    """
    name = f"{version}-{backend}"
    if not _INSTALL_NAME.match(name):
        raise UsageError(f"'{name}' is not a name an install can have (letters, digits, '.', '-', '_', '+')")
    return name
