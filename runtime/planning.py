"""The planning interface between the adapters and the installer: request, plans and listing.

See docs/adapters.md, "The installer's questions".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NewType, Protocol

from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.fixes import Fix, FixLike
from superfluid.runtime.kernel.options import flag_values
from superfluid.runtime.kernel.ordering import backend_family
from superfluid.runtime.kernel.redact import redact_url

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host
    from superfluid.runtime.hostfacts.needs import Needs

__all__ = [
    "first_published",
    "CHOSEN_BY",
    "DIGEST_SOURCES",
    "Sha256",
    "InstallName",
    "Platform",
    "AssetLike",
    "ReleaseLike",
    "Listing",
    "ForRelease",
    "NotInstallable",
    "ListingNeeded",
    "DigestConflict",
    "Request",
    "PlanAsset",
    "Plan",
    "parse_sha256",
    "is_install_name",
    "install_name",
    "parse_install_name",
    "is_local",
    "backend_runs_here",
    "stack_refusal",
    "all_refused",
]

#: how a plan was chosen, as the receipt records it (SPEC §5.4)
CHOSEN_BY = ("abi", "line", "tested", "pin", "untested", "from")
#: where an asset's expected digest comes from, strongest first
DIGEST_SOURCES = ("pin", "flag", "release", "api", "computed", "absent")  # absent: not in the listed release

#: 64 lower-case hexadecimal digits
Sha256 = NewType("Sha256", str)
#: ``<version>-<backend>``, a name a directory can have
InstallName = NewType("InstallName", str)
#: ``<os>-<arch>``: ``linux-x64``, ``macos-arm64``
Platform = NewType("Platform", str)

_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")


def parse_sha256(text: str | None) -> Sha256 | None:
    """``text`` as a digest (case and a ``sha256:`` prefix forgiven), or None when it is not one."""
    if not isinstance(text, str):
        return None
    hexdigest = text.strip().lower().removeprefix("sha256:")
    return Sha256(hexdigest) if _HEX64.fullmatch(hexdigest) else None


def is_install_name(name: str) -> bool:
    """Whether ``name`` can name an install's directory: letters, digits, ``.``, ``-``, ``_``,
    ``+``, not starting with a dot."""
    return bool(_NAME.fullmatch(name))


def install_name(version: str, backend: str) -> InstallName:
    """``<version>-<backend>``, refused when it could not be a directory name.

    Raises:
        UsageError: the name would start with a dot or hold a character other than letters,
            digits, ``.``, ``-``, ``_``, ``+``.
    """
    name = f"{version}-{backend}"
    if not is_install_name(name):
        raise UsageError(f"'{name}' is not a name an install can have (letters, digits, '.', '-', '_', '+')")
    return InstallName(name)


def first_published(plans: Sequence[Plan]) -> Plan | None:
    """The plan an install tries first: the first whose archives the release publishes (one with an
    ``absent`` archive is skipped) and that is not ``refused`` here, or None."""
    return next((p for p in plans if p.refused is None and all(a.digest_source != "absent" for a in p.assets)), None)


def parse_install_name(name: str) -> tuple[str, str] | None:
    """``(version, backend)`` of an install name, or None when it does not name both: the version
    is what comes before the first ``-`` (a release's version holds none: ``0.4.0``, ``b11642``,
    ``custom``), the backend all after it (a backend may hold one: ``cuda-13.4``, ``sycl-fp16``)."""
    version, _, backend = name.partition("-")
    return (version, backend) if version and backend else None


def is_local(source: str) -> bool:
    """A path on this machine: ``file://…`` or any string without ``://``."""
    return source.startswith("file://") or "://" not in source


# -- what a planner reads ---------------------------------------------------------------------------


class AssetLike(Protocol):
    """One asset of a listed release."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def size(self) -> int | None: ...
    @property
    def digest(self) -> str | None: ...  # the listing's "sha256:<hex>", when it gives one


class ReleaseLike(Protocol):
    """One listed release, drafts already dropped by the source."""

    @property
    def tag(self) -> str: ...
    @property
    def prerelease(self) -> bool: ...
    @property
    def assets(self) -> Sequence[AssetLike]: ...


class Listing(Protocol):
    """The releases of one runtime's repository, as a planner reads them (the installer's source).

    ``repo`` names the repository in messages. ``release(tag, optional=True)`` answers None for a
    tag that is not published; without ``optional`` the source's own error says so. ``text``
    reads a small asset, checked against the listing's digest. ``asset_url`` places an asset the
    listing lacks (a recipe pin) at the source.
    """

    @property
    def repo(self) -> str: ...
    def releases(self) -> Sequence[ReleaseLike]: ...
    def release(self, tag: str, *, optional: bool = False) -> ReleaseLike | None: ...
    def text(self, release: ReleaseLike, asset: AssetLike) -> str: ...
    def asset_url(self, tag: str, name: str) -> str: ...


# -- refusals ---------------------------------------------------------------------------------------


class NotInstallable(SuperfluidError):
    """Nothing the request names installs here; the message says why and what would instead."""

    def __init__(self, message: str, *, instead: str | None = None, fix: FixLike = None,
                 advice: str | None = None) -> None:
        super().__init__(message, fix=fix, advice=advice)
        self.instead = instead  # the version that would install instead, when there is one
        #: the plans refused, when it is every plan's refusal (``all_refused``): a dry run shows them
        self.plans: tuple[Plan, ...] = ()


class ListingNeeded(NotInstallable):
    """What the request names is known only from the release listing (an untested build's archives):
    planned from the recipe alone, nothing can be said of it yet (the installer asks the listing)."""


class DigestConflict(SuperfluidError):
    """``--sha256`` disagrees with a pin or with what the release states; never silently resolved."""

    def __init__(self, name: str, flag: str, other: str, other_source: str) -> None:
        super().__init__(
            f"{name}: --sha256 {flag} disagrees with {other_source} {other}",
            advice="a pin is never overridden; drop --sha256, or check the digest you passed",
        )
        self.name = name
        self.flag = flag
        self.other = other
        self.other_source = other_source


# -- the request and the plans ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ForRelease:
    """What a superfluid release drives: its compat document's ``runtimes``, and which
    release it is. A request with none plans for this package's own document."""

    release: str
    version: str
    compat_sha256: str
    runtimes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, str]:
        """What a plan and a receipt record: ``{"release", "version", "compat_sha256"}``."""
        return {"release": self.release, "version": self.version, "compat_sha256": self.compat_sha256}


@dataclass(kw_only=True, frozen=True, slots=True)
class Request:
    """What is asked: ``runtime install <id> [--version V] [--backend B] [--from URL|PATH]
    [--sha256 H] [--untested]``, and the worker's ``plan`` line."""

    id: str
    version: str | None = None
    backend: str | None = None
    from_: str | None = None
    sha256: Sha256 | None = None
    untested: bool = False
    for_: ForRelease | None = None  # plan for another release's compat document (``--for``)

    @classmethod
    def parse(cls, runtime_id: str, *, version: str | None = None, backend: str | None = None,
              from_: str | None = None, sha256: str | None = None, untested: bool = False,
              for_: ForRelease | None = None) -> Request:
        """A request with its flags normalised: ``v`` dropped from a version, backend and digest
        lower-cased.

        Raises:
            UsageError: a malformed ``--sha256``, ``--version`` or ``--backend`` (exit 2).
        """
        if version is not None:
            version = version.strip()
            if version[:1] in ("v", "V") and version[1:2].isdigit():
                version = version[1:]
            if not version or not _NAME.fullmatch(version):
                raise UsageError(f"--version {version!r} is not a version (e.g. 0.4.0, b11642)")
        if backend is not None:
            backend = backend.strip().lower()
            if not backend or not _NAME.fullmatch(backend):
                raise UsageError(f"--backend {backend!r} is not a backend (e.g. cpu, cuda, metal, vulkan)")
        digest = None
        if sha256 is not None:
            digest = parse_sha256(sha256)
            if digest is None:
                raise UsageError(f"--sha256 {sha256!r} is not a SHA-256 (64 hexadecimal digits)")
        if from_ is not None and not from_.strip():
            raise UsageError("--from needs a path or a URL")
        return cls(id=runtime_id, version=version, backend=backend, from_=from_, sha256=digest, untested=untested,
                   for_=for_)

    @classmethod
    def from_argv(cls, runtime_id: str, argv: Sequence[str]) -> Request:
        """The worker's ``plan`` line: ``[--version V] [--backend B] [--from URL|PATH] [--sha256 H]
        [--untested]``; ``--flag=value`` is read as ``--flag value``.

        Raises:
            UsageError: an unknown flag, a flag without its value or given twice, a value to
                ``--untested``, or a malformed value (as ``parse``).
        """
        untested = False
        rest: list[str] = []
        for token in argv:
            if token.partition("=")[0] == "--untested":
                if "=" in token:
                    raise UsageError("--untested takes no value")
                untested = True
            else:
                rest.append(token)
        values = flag_values(rest, ("--version", "--backend", "--from", "--sha256"))
        return cls.parse(runtime_id, version=values.get("--version"), backend=values.get("--backend"),
                         from_=values.get("--from"), sha256=values.get("--sha256"), untested=untested)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanAsset:
    """One file a plan fetches, and the digest it must have.

    ``sha256`` is the expected digest once known (None for a local file without one, or while the
    release's ``.sha256`` is still to be read: ``sidecar`` names it); ``digest_source`` says which
    statement it is (``DIGEST_SOURCES``); ``checked`` every statement it was agreed against.
    """

    name: str
    url: str
    sha256: Sha256 | None
    size: int | None
    digest_source: str
    checked: tuple[str, ...] = ()
    sidecar: str | None = None  # URL of <name>.sha256, when the release publishes one to read
    api_sha256: Sha256 | None = None  # the listing's digest, when given
    pin: Sha256 | None = None  # the recipe's digest, when pinned

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "url": redact_url(self.url), "sha256": self.sha256, "size": self.size,
                               "digest_source": self.digest_source, "checked": list(self.checked)}
        if self.sidecar:
            out["sidecar"] = self.sidecar
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """One install an adapter proposes; plans come as an ordered fallback list.

    ``facts`` are the adapter's own facts the probe holds the staged library to (llama.cpp's
    ``layout``); they are written at the top level of the plan's JSON. ``made_for`` names the release
    a ``--for`` plan was made for (``ForRelease.to_json``): ``tested`` and ``abi`` are then that release's.
    ``needs`` are what its build needs of the host, when recorded before the download; ``refused``
    why this host does not meet them (``needs.judge``): the plan is shown, and the installer skips it
    without fetching a byte of it.
    """

    id: str
    version: str
    backend: str
    assets: tuple[PlanAsset, ...]
    tested: bool
    chosen_by: str
    abi: int | None
    why: str
    platform: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)
    made_for: Mapping[str, str] | None = None
    needs: Needs | None = None
    refused: str | None = None
    #: the same build with its CUDA runtime archive: tried next when this plan's GPU module does not
    #: load for a missing CUDA runtime (``probe.missing_cuda_runtime``), else never
    retry: Plan | None = None
    #: who builds its assets (``{"repository", "workflow", "ref"}``): the workflow an asset's Sigstore
    #: bundle must be signed by, when one is published (the recipe's ``built_by``, a ``--for`` release's,
    #: a lock's); None: no identity is known (a ``--from`` file)
    built_by: Mapping[str, str | None] | None = None

    @property
    def install(self) -> InstallName:
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
        for key, value in self.facts.items():
            out.setdefault(key, value)
        if self.made_for is not None:
            out["for"] = dict(self.made_for)
        if self.needs is not None:
            out["needs"] = self.needs.to_json()
        if self.refused is not None:
            out["refused"] = self.refused
        if self.retry is not None:
            out["retry"] = self.retry.to_json()
        if self.built_by is not None:
            out["built_by"] = dict(self.built_by)
        return out


# -- rules every adapter shares ---------------------------------------------------------------------


def backend_runs_here(backend: str, platform: str, host: Host) -> str | None:
    """None when an engine of ``backend`` built for ``platform`` can run on ``host``, else why not.

    The platform must be the host's. ``cpu`` runs anywhere; ``metal`` on macOS arm64; ``cuda``
    needs an NVIDIA driver; ``rocm`` ROCm; ``vulkan`` a Vulkan driver; others are never chosen on
    their own (``--backend`` names them).
    """
    if platform != host.platform:
        return f"it is built for {platform}; this is {host.describe()}"
    family = backend_family(backend)
    if family == "cpu":
        return None
    if family == "metal":
        return None if host.platform == "macos-arm64" else "Metal runs on Apple silicon only"
    if family == "cuda":
        return None if host.nvidia_driver else "it needs an NVIDIA driver, and none was found"
    if family == "rocm":
        return None if host.rocm else "it needs ROCm, and none was found"
    if family == "vulkan":
        return None if host.vulkan else "it needs a Vulkan driver, and none was found"
    return f"a {backend} engine is installed only when named with --backend {backend}"


#: the GPU stack a backend family needs of the host, and the ``SUPERFLUID_HOST_*`` override that states it
_STACKS = {"cuda": ("an NVIDIA driver", "SUPERFLUID_HOST_NVIDIA_DRIVER=<version>"),
           "rocm": ("ROCm", "SUPERFLUID_HOST_ROCM=1")}


def stack_refusal(backend: str, host: Host) -> str | None:
    """Why an engine of ``backend`` cannot run on ``host`` for want of its GPU stack (a CUDA build
    without an NVIDIA driver, a ROCm build without ROCm): the missing fact, and the override that
    states it where the probe cannot see it; None otherwise. A plan named with ``--backend`` is
    refused by it before any of it is fetched."""
    family = backend_family(backend)
    if family not in _STACKS or backend_runs_here(backend, host.platform, host) is None:  # the one rule
        return None
    stack, override = _STACKS[family]
    return f"a {backend} build needs {stack}, and this host has none ({override} states one the probe cannot see)"


def why_skipped(plan: Plan) -> str | None:
    """Why an install skips ``plan`` before fetching a byte of it: its archive is not in the release
    (``absent``), or its needs are not met here (``refused``); None: it is tried."""
    absent = [a.name for a in plan.assets if a.digest_source == "absent"]
    if absent:
        return f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not in this release"
    return plan.refused


def all_refused(plans: Sequence[Plan]) -> NotInstallable | None:
    """The refusal an install of ``plans`` ends in when every one is skipped before any download
    (``why_skipped``), in the install's words: ``<id> <install>: <why>`` for one plan, ``no <id>
    build installs here: <install>: <why>; ...`` for several, with the command that lists what does
    install here; None when one is tried."""
    reasons = [(p, why_skipped(p)) for p in plans]
    if not plans or any(why is None for _, why in reasons):
        return None
    runtime_id = plans[0].id
    lists = Fix.superfluid("runtime", "versions", runtime_id, does="lists the versions and why each installs here")
    if len(plans) == 1:
        p, why = reasons[0]
        refused = NotInstallable(f"{p.id} {p.install}: {why}", fix=lists)
    else:
        refused = NotInstallable(f"no {runtime_id} build installs here: "
                                 + "; ".join(f"{p.install}: {why}" for p, why in reasons), fix=lists)
    refused.plans = tuple(plans)
    return refused
