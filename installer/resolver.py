"""Which build installs here: the version-choice rules of SPEC §4 and the digest policy of §8.2.

Every rule is one pure function whose docstring states it; inputs are values (the request, the
adapter's recipe, host facts, the release listing and the few small texts read from it), the
output is an ordered list of ``Plan`` objects or a typed refusal that says why and what would
install instead. Nothing here opens a file or a connection: the workflow (``install.py``) reads the
listing, the ABI assets and the ``.sha256`` sidecars and hands their contents in.

basert (SPEC §4.1) is chosen by ABI number; llama.cpp (§4.2) by the recipe's tested builds, through
the adapter's own planner; MLX (§4.3) by its tested versions, on macOS arm64 only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from superfluid.installer.errors import InconsistentRelease
from superfluid.runtime.errors import SuperfluidError, UsageError

__all__ = [
    "CHOSEN_BY",
    "DIGEST_SOURCES",
    "AssetLike",
    "ReleaseLike",
    "Request",
    "PlanAsset",
    "Plan",
    "Bundle",
    "NotInstallable",
    "DigestConflict",
    "version_key",
    "backend_rank",
    "backend_family",
    "is_local",
    "install_name",
    "parse_bundle_name",
    "parse_abi_asset_name",
    "read_abi_asset",
    "release_abi",
    "abi_choice",
    "backend_runs_here",
    "parse_sha256_file",
    "api_sha256",
    "expected_digest",
    "settle_asset",
    "abi_assets_needed",
    "resolve_basert",
    "resolve_from",
    "resolve",
]

#: how a plan was chosen, as the receipt records it (SPEC §5.4)
CHOSEN_BY = ("abi", "line", "tested", "pin", "untested", "from")
#: where an asset's expected digest comes from, strongest first
DIGEST_SOURCES = ("pin", "flag", "release", "api", "computed")

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_INSTALL_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*$")
_BACKEND_RANK = {"metal": 0, "cuda": 1, "rocm": 2, "vulkan": 3, "sycl": 4, "openvino": 5, "cpu": 9}
_BUNDLE = re.compile(
    r"^basert-engine-(?P<os>linux|macos)-(?P<arch>x64|arm64)(?:-(?P<backend>[a-z][a-z0-9_.]*))?"
    r"-(?P<version>[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+]*)\.tar\.gz$"
)
_ABI_ASSET = re.compile(r"^basert-engine-abi-(?P<n>0|[1-9][0-9]*)\.txt$")


# -- the facts the resolver reads ----------------------------------------------------------------


class AssetLike(Protocol):
    """One asset of a listed release (the net helper's ``github.Asset`` has these)."""

    name: str
    url: str
    size: int | None
    digest: str | None  # the API's "sha256:<hex>", when the listing gives one


class ReleaseLike(Protocol):
    """One listed release (drafts already dropped by the source)."""

    tag: str
    prerelease: bool
    assets: Sequence[AssetLike]


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


@dataclass(frozen=True)
class Bundle:
    """What a baseRT bundle's name says: ``basert-engine-<platform>[-<backend>]-<version>.tar.gz``."""

    name: str
    platform: str
    backend: str
    version: str


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


def backend_family(backend: str) -> str:
    """The text before the first ``-`` or ``_``: ``cuda`` of ``cuda-13.4``."""
    return re.split(r"[-_]", backend, maxsplit=1)[0]


def backend_rank(backend: str) -> int:
    """SPEC §3: metal 0, cuda 1, rocm 2, vulkan 3, sycl 4, openvino 5, other 8, cpu 9 (by family)."""
    return _BACKEND_RANK.get(backend_family(backend), 8)


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


def api_sha256(digest: str | None) -> str | None:
    """The hex of a listing's ``digest`` (``"sha256:<hex>"``); None for none or another algorithm."""
    if not digest:
        return None
    algo, _, hexdigest = digest.partition(":")
    if not hexdigest:
        algo, hexdigest = "sha256", algo
    hexdigest = hexdigest.strip().lower()
    return hexdigest if algo.lower() == "sha256" and _HEX64.match(hexdigest) else None


def _version_of_tag(tag: str) -> str:
    return tag[1:] if tag[:1] in ("v", "V") and tag[1:2].isdigit() else tag


def _line_of(version: str) -> str | None:
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def _describe(platform: str) -> str:
    os_name, _, arch = platform.partition("-")
    return ("macOS" if os_name == "macos" else "Linux") + f" {arch}"


# -- basert: bundle names and ABI numbers (SPEC §4.1, §5.3) ----------------------------------------


def parse_bundle_name(name: str) -> Bundle | None:
    """Read ``basert-engine-<platform>[-<backend>]-<version>.tar.gz``; None for another name.

    The backend is absent for the platform's own engine: ``metal`` on macos-arm64, ``cpu``
    elsewhere (a mirror's ``linux-x64``); upstream names ``cuda`` on ``linux-arm64-cuda``.
    """
    m = _BUNDLE.match(name)
    if not m:
        return None
    platform = f"{m['os']}-{m['arch']}"
    backend = m["backend"] or ("metal" if platform == "macos-arm64" else "cpu")
    return Bundle(name, platform, backend, m["version"])


def parse_abi_asset_name(name: str) -> int | None:
    """``N`` of an asset named ``basert-engine-abi-<N>.txt`` (decimal, no leading zero); else None."""
    m = _ABI_ASSET.match(name)
    return int(m["n"]) if m else None


def read_abi_asset(repo: str, tag: str, name: str, text: str) -> int:
    """The ABI number a ``basert-engine-abi-<N>.txt`` states (SPEC §5.3).

    Its content must be exactly the decimal ``N`` of its name and one newline; anything else makes
    the release inconsistent (it contradicts itself, so nothing of it is installed).

    Raises:
        InconsistentRelease: the content is not ``"<N>\\n"`` for the ``N`` in the name.
    """
    n = parse_abi_asset_name(name)
    if n is None:
        raise InconsistentRelease(repo, tag, "is not named basert-engine-abi-<N>.txt", asset=name)
    if text != f"{n}\n":
        shown = text if len(text) <= 20 else text[:20] + "..."
        raise InconsistentRelease(
            repo, tag, f"states {shown!r} where its name says ABI {n} (content must be {f'{n}'!r} and a newline)",
            asset=name, expected=f"{n}\n", got=text,
            fix="the release contradicts itself: report it to its publisher; nothing of it is installed",
        )
    return n


def release_abi(repo: str, tag: str, abi_texts: Mapping[str, str], pin_abi: int | None,
                pinned: bool) -> tuple[int | None, str | None]:
    """A release's ABI number and where it was read: ``(N, "asset")``, ``(N, "pin")`` or
    ``(None, None)`` when the release states none (SPEC §4.1).

    ``abi_texts`` maps each ``basert-engine-abi-<N>.txt`` asset of the release to its content. Two
    ABI assets must agree; a recipe pin's ``abi`` must agree with the asset too.

    Raises:
        InconsistentRelease: an ABI asset's content is not its name's number, two ABI assets
            state different numbers, or the release's number differs from the recipe pin's.
    """
    stated = {read_abi_asset(repo, tag, name, text) for name, text in sorted(abi_texts.items())}
    if len(stated) > 1:
        raise InconsistentRelease(repo, tag, f"publishes ABI assets for different numbers ({sorted(stated)})")
    if stated:
        n = stated.pop()
        if pinned and pin_abi is not None and pin_abi != n:
            raise InconsistentRelease(
                repo, tag, f"states ABI {n}, and this superfluid's recipe pins it as ABI {pin_abi}",
                expected=str(pin_abi), got=str(n),
            )
        return n, "asset"
    if pinned and pin_abi is not None:
        return pin_abi, "pin"
    return None, None


def abi_choice(version: str, abi: int | None, drives: int, line: str | None) -> tuple[str | None, str]:
    """Does this superfluid drive a release of ``version`` stating ``abi``? (SPEC §4.1, install choice)

    - a stated number equal to ours is driven: ``("abi", why)``;
    - an unnumbered release of our ABI's unnumbered line (0.3.x for ABI 1): ``("line", why)``;
    - another number, or an unnumbered release off the line, is not: ``(None, why-not)``; it
      installs only with ``--untested``.
    """
    if abi is not None:
        if abi == drives:
            return "abi", f"baseRT {version} states ABI {abi}, the ABI this superfluid drives"
        return None, f"baseRT {version} states ABI {abi}; this superfluid drives ABI {drives}"
    if line is not None and _line_of(version) == line:
        return "line", f"baseRT {version} states no ABI number and is of the {line}.x line, which carries ABI {drives}"
    carried = f"only the unnumbered {line}.x line carries ABI {drives}" if line else "no unnumbered line carries it"
    return None, f"baseRT {version} states no ABI number; this superfluid drives ABI {drives}, and {carried}"


def backend_runs_here(backend: str, platform: str, host: Any) -> str | None:
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


# -- digests (SPEC §8.2) ---------------------------------------------------------------------------


def parse_sha256_file(repo: str, tag: str, name: str, text: str) -> str:
    """The digest a ``<name>.sha256`` states: ``<64 hex>  <name>`` (``sha256sum``'s line; a lone
    digest is accepted too, and a ``*`` before the name).

    Raises:
        InconsistentRelease: it holds no 64-hex digest first, or names another file.
    """
    words = text.split()
    digest = words[0].lower() if words else ""
    if not _HEX64.match(digest):
        raise InconsistentRelease(repo, tag, "holds no SHA-256 (expected '<64 hex>  <name>')", asset=f"{name}.sha256")
    if len(words) > 1 and words[1].lstrip("*") != name:
        raise InconsistentRelease(repo, tag, f"is the digest of {words[1]!r}, not of {name!r}", asset=f"{name}.sha256")
    return digest


def expected_digest(name: str, *, pin: str | None = None, flag: str | None = None, sidecar: str | None = None,
                    api: str | None = None, local: bool = False, sidecar_pending: bool = False,
                    require_sidecar: bool = False,
                    where: tuple[str, str] = ("", "")) -> tuple[str | None, str, tuple[str, ...]]:
    """The digest an asset must have, where it comes from, and what it was agreed against (SPEC §8.2).

    - A pinned asset must match its pin, and the listing's digest when it gives one; a ``--sha256``
      that differs from the pin is an error (a pin is never overridden), as is a ``.sha256``.
    - An unpinned asset must match every statement present: the release's ``<name>.sha256``, the
      listing's digest and ``--sha256``; any two that disagree are fatal, naming both values.
    - An unpinned remote asset with no statement at all is refused (nothing from the network is
      installed unverified); a local file with none installs, its computed digest recorded:
      ``(None, "computed", ())``.
    - ``require_sidecar`` (baseRT, which publishes one beside every bundle): an unpinned asset
      without ``--sha256`` needs its ``<name>.sha256``; the listing's digest alone is not enough.
    - ``sidecar_pending``: the ``.sha256`` is published but not read yet; the answer is provisional
      and the caller settles it once read (``settle_asset``).

    Raises:
        DigestConflict: ``--sha256`` disagrees with the pin or with the release.
        InconsistentRelease: the pin, the listing's digest and the ``.sha256`` disagree.
        NotInstallable: a remote asset with no digest from any statement.
    """
    repo, tag = where
    if pin is not None:
        if flag is not None and flag != pin:
            raise DigestConflict(name, flag, pin, "the pin of this superfluid's recipe")
        for other, what in ((api, "the listing's digest"), (sidecar, f"{name}.sha256")):
            if other is not None and other != pin:
                raise InconsistentRelease(repo, tag, f"{what} is {other}, and this superfluid pins {pin}",
                                          asset=name, expected=pin, got=other,
                                          fix="nothing was installed: the source serves other bytes than were pinned")
        checked = ("pin",) + (("api",) if api else ()) + (("release",) if sidecar else ())
        return pin, "pin", checked
    if sidecar is not None and api is not None and sidecar != api:
        raise InconsistentRelease(repo, tag, f"{name}.sha256 states {sidecar}, and the listing's digest is {api}",
                                  asset=name, expected=sidecar, got=api,
                                  fix="the release contradicts itself; nothing of it was installed")
    if flag is not None:
        for other, what in ((sidecar, f"the release's {name}.sha256"), (api, "the listing's digest")):
            if other is not None and other != flag:
                raise DigestConflict(name, flag, other, what)
        checked = ("flag",) + (("release",) if sidecar else ()) + (("api",) if api else ())
        return flag, "flag", checked
    if sidecar is not None:
        return sidecar, "release", ("release",) + (("api",) if api else ())
    if sidecar_pending:
        return api, "release", ("api",) if api else ()
    if require_sidecar and not local:
        raise NotInstallable(
            f"{name}: the release publishes no {name}.sha256 beside it, and no pin names its digest",
            fix="check the file's SHA-256 with its publisher and pass it with --sha256")
    if api is not None:
        return api, "api", ("api",)
    if local:
        return None, "computed", ()
    raise NotInstallable(
        f"{name}: no SHA-256 to check it against (no pin, no {name}.sha256 beside it, no digest in the listing), "
        "and only a file on this machine is installed unchecked",
        fix="check the file's SHA-256 with its publisher and pass it with --sha256",
    )


def settle_asset(asset: PlanAsset, sidecar_text: str | None, *, flag: str | None = None,
                 where: tuple[str, str] = ("", "")) -> PlanAsset:
    """The asset with its final expected digest once its ``.sha256`` (named by ``asset.sidecar``) was
    read: ``sidecar_text`` is its content.

    Raises:
        InconsistentRelease: the ``.sha256`` is listed but was not read (``sidecar_text`` None).
        DigestConflict, NotInstallable: as ``expected_digest``; as ``parse_sha256_file``.
    """
    if asset.sidecar and sidecar_text is None:
        raise InconsistentRelease(where[0], where[1], f"lists {asset.name}.sha256, and it could not be read",
                                  asset=asset.name)
    sidecar = parse_sha256_file(where[0], where[1], asset.name, sidecar_text) if sidecar_text is not None else None
    sha, source, checked = expected_digest(asset.name, pin=asset.pin, flag=flag, sidecar=sidecar,
                                           api=asset.api_sha256, local=is_local(asset.url), where=where)
    return replace(asset, sha256=sha, digest_source=source, checked=checked, sidecar=None)


# -- basert: the candidates and the choice ---------------------------------------------------------


@dataclass(frozen=True)
class _Offer:
    """One bundle a candidate release offers, with what the listing and the recipe say of it."""

    bundle: Bundle
    url: str
    size: int | None
    api: str | None  # the listing's digest
    pin: str | None  # the recipe's digest
    pinned: bool  # the recipe pins this very asset (by name)


@dataclass(frozen=True)
class _Candidate:
    version: str
    tag: str
    prerelease: bool
    offers: tuple[_Offer, ...]
    sidecars: Mapping[str, str]  # bundle name -> URL of its .sha256
    abi_assets: tuple[str, ...]
    pinned: bool
    pin_abi: int | None


def _pins(recipe: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(p["version"]): p for p in recipe.get("pinned", []) if isinstance(p, Mapping) and "version" in p}


def _url_for(recipe: Mapping[str, Any], version: str, name: str) -> str:
    template = str(recipe.get("release") or "")
    return template.replace("{version}", version).replace("{name}", name) if template else name


def _listed(rel: ReleaseLike, pin: Mapping[str, Any] | None) -> _Candidate:
    version = _version_of_tag(rel.tag)
    by_name = {a.name: a for a in rel.assets}
    pinned_assets = {str(a["name"]): a for a in (pin or {}).get("assets", [])}
    offers = []
    for a in rel.assets:
        b = parse_bundle_name(a.name)
        if b is None or b.version != version:
            continue
        pa = pinned_assets.get(a.name)
        size = int(pa["size"]) if pa and pa.get("size") is not None else a.size
        offers.append(_Offer(b, a.url, size, api_sha256(a.digest), (pa or {}).get("sha256"), pa is not None))
    sidecars = {o.bundle.name: by_name[o.bundle.name + ".sha256"].url for o in offers
                if o.bundle.name + ".sha256" in by_name}
    abi_assets = tuple(sorted(a.name for a in rel.assets if parse_abi_asset_name(a.name) is not None))
    return _Candidate(version, rel.tag, bool(rel.prerelease), tuple(offers), sidecars, abi_assets,
                      pin is not None, (pin or {}).get("abi"))


def _candidates(recipe: Mapping[str, Any], releases: Sequence[ReleaseLike]) -> dict[str, _Candidate]:
    """Every version the listing or the recipe knows, with its bundles; a pin not listed is offered
    at the recipe's URL, its ABI from the pin."""
    pins = _pins(recipe)
    out: dict[str, _Candidate] = {}
    for rel in releases:
        version = _version_of_tag(rel.tag)
        if version not in out:  # a repeated tag: the first listed wins
            out[version] = _listed(rel, pins.get(version))
    for version, pin in pins.items():
        if version in out:
            continue
        offers = []
        for a in pin.get("assets", []):
            b = parse_bundle_name(str(a["name"]))
            if b is not None:
                offers.append(_Offer(b, _url_for(recipe, version, b.name), a.get("size"), None, a.get("sha256"), True))
        out[version] = _Candidate(version, f"v{version}", False, tuple(offers), {}, (), True, pin.get("abi"))
    return out


def abi_assets_needed(recipe: Mapping[str, Any], releases: Sequence[ReleaseLike],
                      platform: str) -> list[tuple[ReleaseLike, AssetLike]]:
    """The ABI assets the workflow must read before ``resolve_basert`` can choose: those of every
    release with a bundle for ``platform`` (newest first)."""
    needed = []
    for rel in sorted(releases, key=lambda r: version_key(_version_of_tag(r.tag)), reverse=True):
        version = _version_of_tag(rel.tag)
        if not any((b := parse_bundle_name(a.name)) and b.platform == platform and b.version == version
                   for a in rel.assets):
            continue
        needed.extend((rel, a) for a in rel.assets if parse_abi_asset_name(a.name) is not None)
    return needed


@dataclass(frozen=True)
class _Judged:
    cand: _Candidate
    abi: int | None
    abi_from: str | None
    chosen_by: str | None  # None: not driven (installs only with --untested)
    why: str
    error: InconsistentRelease | None = None


def _judge(repo: str, cand: _Candidate, abi_texts: Mapping[tuple[str, str], str], drives: int,
           line: str | None) -> _Judged:
    texts = {name: abi_texts[(cand.tag, name)] for name in cand.abi_assets if (cand.tag, name) in abi_texts}
    try:
        abi, abi_from = release_abi(repo, cand.tag, texts, cand.pin_abi, cand.pinned)
    except InconsistentRelease as e:
        return _Judged(cand, None, None, None, str(e), e)
    chosen, why = abi_choice(cand.version, abi, drives, line)
    if chosen is not None and abi_from == "asset":
        why += f" (basert-engine-abi-{abi}.txt)"
    if abi_from == "pin":
        chosen = "pin" if chosen else None
        why += " (as this superfluid's recipe pins it)"
    return _Judged(cand, abi, abi_from, chosen, why)


def _plans_for(judged: _Judged, host: Any, request: Request, untested: bool, repo: str) -> list[Plan]:
    """The plans of one chosen release: its bundles that run here, best backend first.

    ``chosen_by`` is ``"pin"`` for a bundle the recipe pins by name, else how the release was
    judged (``"abi"``, ``"line"``), or ``"untested"``.
    """
    cand = judged.cand
    mine = [o for o in cand.offers if o.bundle.platform == host.platform]
    if request.backend is not None:
        runnable = [o for o in mine if request.backend in (o.bundle.backend, backend_family(o.bundle.backend))]
        if not runnable:
            have = ", ".join(sorted({o.bundle.backend for o in mine})) or "none"
            raise NotInstallable(f"baseRT {cand.version} has no {request.backend} bundle for {host.platform} "
                                 f"(it has: {have})", fix="name one of those with --backend, or leave --backend out")
    else:
        runnable = [o for o in mine if backend_runs_here(o.bundle.backend, o.bundle.platform, host) is None]
        if not runnable:
            reasons = "; ".join(f"{o.bundle.backend}: {backend_runs_here(o.bundle.backend, o.bundle.platform, host)}"
                                for o in mine)
            raise NotInstallable(f"no bundle of baseRT {cand.version} for {host.platform} runs on {host.describe()} "
                                 f"({reasons})", fix="name a backend with --backend to install one anyway")
    runnable.sort(key=lambda o: (backend_rank(o.bundle.backend), o.bundle.backend))
    plans = []
    for o in runnable:
        name = o.bundle.name
        sha, source, checked = expected_digest(name, pin=o.pin, flag=request.sha256, api=o.api,
                                               sidecar_pending=name in cand.sidecars, require_sidecar=True,
                                               where=(repo, cand.tag))
        asset = PlanAsset(name, o.url, sha, o.size, source, checked, cand.sidecars.get(name), o.api, o.pin)
        if untested:
            chosen_by, why = "untested", f"{judged.why} (UNTESTED: installed with --untested)"
        elif o.pinned:
            chosen_by, why = "pin", f"{judged.why}; pinned in this superfluid's recipe"
        else:
            chosen_by, why = judged.chosen_by or "abi", judged.why
        plans.append(Plan("basert", cand.version, o.bundle.backend, (asset,), not untested, chosen_by, judged.abi,
                          f"{host.describe()}: {why}; the {o.bundle.backend} bundle", host.platform))
    return plans


def _newest(judged: Sequence[_Judged]) -> _Judged | None:
    return max(judged, key=lambda j: version_key(j.cand.version), default=None)


def resolve_basert(request: Request, recipe: Mapping[str, Any], host: Any, releases: Sequence[ReleaseLike],
                   abi_texts: Mapping[tuple[str, str], str], *, drives: int, line: str | None,
                   repo: str = "basecompute/baseRT") -> list[Plan]:
    """basert by ABI number (SPEC §4.1): the newest release this superfluid drives that has a bundle
    for this platform, or the one ``--version`` names.

    A release is driven when it states our ABI (its ``basert-engine-abi-<N>.txt``, or the recipe
    pin's ``abi``), or states none and is of our unnumbered line (0.3.x for ABI 1). Another number,
    or unnumbered off the line, installs only with ``--untested`` (``tested: false``). A release
    whose ABI asset contradicts its name is never chosen; named, it is refused. Pre-releases are
    chosen only when named. ``abi_texts`` maps ``(tag, asset name)`` to the content read.

    Raises:
        NotInstallable: nothing the request names installs here; says what would instead.
        InconsistentRelease: the named release contradicts itself.
        DigestConflict: ``--sha256`` disagrees with a pin or the release.
    """
    cands = _candidates(recipe, releases)
    here = [c for c in cands.values() if any(o.bundle.platform == host.platform for o in c.offers)]
    judged = [_judge(repo, c, abi_texts, drives, line) for c in here]
    driven = [j for j in judged if j.chosen_by is not None and not j.cand.prerelease]
    best = _newest(driven)
    drives_what = f"ABI {drives}" + (f" (or the unnumbered {line}.x line)" if line else "")
    if request.version is None:
        if best is not None:
            return _plans_for(best, host, request, False, repo)
        if not here:
            platforms = sorted({o.bundle.platform for c in cands.values() for o in c.offers})
            raise NotInstallable(
                f"baseRT publishes no bundle for {host.platform} (this is {host.describe()}; bundles exist for "
                f"{', '.join(platforms) or 'no platform'})",
                fix="use a mirror that carries one (--mirror URL|DIR), or --from PATH|URL with --sha256")
        newest = _newest([j for j in judged if j.error is None])
        instead = newest.cand.version if newest else None
        tail = f"; --version {instead} --untested installs {instead} anyway" if instead else ""
        raise NotInstallable(
            f"no baseRT release for {host.platform} states {drives_what}, the ABI this superfluid drives"
            + (f": the newest is {instead} ({newest.why})" if newest else "") + tail, instead=instead)
    named = next((j for j in judged if j.cand.version == request.version), None)
    if named is None:
        known = request.version in cands
        newest = best.cand.version if best else "none"
        fault = f"has no bundle for {host.platform}" if known else "is not published"
        raise NotInstallable(f"baseRT {request.version} {fault} (the newest this superfluid drives here is {newest})",
                             instead=best.cand.version if best else None)
    if named.error is not None:
        raise named.error
    if named.chosen_by is not None:
        return _plans_for(named, host, request, False, repo)
    instead = (f"the newest it drives is {best.cand.version}" if best
               else f"no release for {host.platform} states {drives_what}")
    if not request.untested:
        raise NotInstallable(f"{named.why}: {instead}; --untested installs {request.version} anyway",
                             instead=best.cand.version if best else None)
    return _plans_for(named, host, request, True, repo)


# -- --from: an archive named by path or URL -------------------------------------------------------


def resolve_from(request: Request, recipe: Mapping[str, Any], host: Any,
                 parse_name: Callable[[str], tuple[str | None, str | None, str | None]]) -> list[Plan]:
    """``--from URL|PATH``: one plan for exactly that archive (SPEC §6.4, §8.2).

    Version = ``--version``, else read from the name, else ``custom``; backend = ``--backend``, else
    the name's, else the platform's own (metal on macos-arm64, cpu elsewhere). A name for another
    platform is refused. The digest is ``--sha256``, else the recipe's pin when that version pins
    an asset of exactly this file name, else none: a local file then installs with a warning and
    its computed digest recorded; a remote one is refused. The probe of the staged library decides
    whether it is driven (``tested``); ``chosen_by`` is ``"from"``.

    ``parse_name(name) -> (platform, backend, version)``, each None when the name does not say.

    Raises:
        NotInstallable: the archive is for another platform, or remote without a digest.
        DigestConflict: ``--sha256`` disagrees with the pin for that file.
        UsageError: ``--version`` disagrees with the version in the archive's name.
    """
    src = request.from_ or ""
    name = src.rstrip("/").rsplit("/", 1)[-1]
    platform, backend, version = parse_name(name)
    if platform is not None and platform != host.platform:
        raise NotInstallable(f"{src} is built for {platform}; this is {host.describe()}")
    if request.version and version and request.version != version:
        raise UsageError(f"--version {request.version} disagrees with {name}, which is version {version}")
    version = request.version or version or "custom"
    backend = request.backend or backend or ("metal" if host.platform == "macos-arm64" else "cpu")
    pin = None
    for p in recipe.get("pinned", []) + recipe.get("tested", []):
        if str(p.get("version")) == version:
            pin = next((a.get("sha256") for a in p.get("assets", []) if a.get("name") == name), None)
    size = None
    sha, source, checked = expected_digest(name, pin=pin, flag=request.sha256, local=is_local(src))
    asset = PlanAsset(name, src, sha, size, source, checked, None, None, pin)
    why = f"{src}, as named" + ("" if sha else " (no digest given: its computed SHA-256 is recorded)")
    return [Plan(request.id, version, backend, (asset,), not request.untested, "from", None, why, host.platform)]


def _basert_name(name: str) -> tuple[str | None, str | None, str | None]:
    b = parse_bundle_name(name)
    return (b.platform, b.backend, b.version) if b else (None, None, None)


# -- the dispatcher ---------------------------------------------------------------------------------


def resolve(request: Request, recipe: Mapping[str, Any], host: Any, releases: Sequence[ReleaseLike] = (),
            abi_texts: Mapping[tuple[str, str], str] | None = None, *, drives: int | None = None,
            line: str | None = None, planner: Callable[..., list[Plan]] | None = None) -> list[Plan]:
    """The ordered plans for ``request`` on ``host``: one rule per runtime (SPEC §4).

    Raises:
        NotInstallable, InconsistentRelease, DigestConflict, UsageError: as the rule for the runtime.
    """
    if request.id == "basert":
        if request.from_:
            return resolve_from(request, recipe, host, _basert_name)
        if drives is None:
            raise ValueError("resolve: basert needs the ABI number this build drives")
        return resolve_basert(request, recipe, host, releases, abi_texts or {}, drives=drives, line=line)
    if planner is None:
        raise NotInstallable(f"this superfluid has no installer for the {request.id} runtime")
    return planner(request, recipe, host, releases)
