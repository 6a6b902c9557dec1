"""Which build installs here: the version-choice rules of SPEC §4.

Every rule is one pure function whose docstring states it; inputs are values (the request, the
adapter's recipe, host facts, the release listing and the few small texts read from it), the
output is an ordered list of ``Plan`` objects or a typed refusal that says why and what would
install instead. Nothing here opens a file or a connection: the workflow (``install``) reads the
listing, the ABI assets and the ``.sha256`` sidecars and hands their contents in. The digest each
planned asset must have is the digest policy's answer (``digests``, SPEC §8.2).

basert (SPEC §4.1) is chosen by ABI number, here; llama.cpp (§4.2) by the recipe's tested builds,
through the adapter's own planner (``runtime/llamacpp/planner.py``, called by the workflow); MLX
(§4.3) by its tested versions, on macOS arm64 only.

The plan facts and the digest policy are re-exported here, so ``resolver`` is the one import for
the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.installer.digests import api_sha256, expected_digest, parse_sha256_file, settle_asset
from superfluid.installer.errors import InconsistentRelease
from superfluid.installer.plans import (
    CHOSEN_BY,
    DIGEST_SOURCES,
    AssetLike,
    DigestConflict,
    NotInstallable,
    Plan,
    PlanAsset,
    ReleaseLike,
    Request,
    backend_family,
    backend_rank,
    install_name,
    is_local,
    version_key,
)
from superfluid.runtime.basert.bundles import Bundle, default_backend, parse_abi_asset_name, parse_bundle_name
from superfluid.runtime.errors import UsageError

__all__ = [
    "CHOSEN_BY",
    "DIGEST_SOURCES",
    "AssetLike",
    "ReleaseLike",
    "Request",
    "PlanAsset",
    "Plan",
    "NotInstallable",
    "DigestConflict",
    "version_key",
    "backend_rank",
    "backend_family",
    "is_local",
    "install_name",
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


def _version_of_tag(tag: str) -> str:
    return tag[1:] if tag[:1] in ("v", "V") and tag[1:2].isdigit() else tag


def _line_of(version: str) -> str | None:
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


# -- basert: bundle names and ABI numbers (SPEC §4.1, §5.3) ----------------------------------------


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


def _candidates(recipe: Mapping[str, Any], releases: Sequence[ReleaseLike],
                url_for: Callable[[str, str], str] | None = None) -> dict[str, _Candidate]:
    """Every version the listing or the recipe knows, with its bundles. A listed release offers
    what it lists (a pin adds its digest and ABI); a pinned version the listing lacks is offered
    at ``url_for(tag, name)`` (the source's place for it; default the recipe's URL), its ABI from
    the pin."""
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
                url = url_for(f"v{version}", b.name) if url_for else _url_for(recipe, version, b.name)
                offers.append(_Offer(b, url, a.get("size"), None, a.get("sha256"), True))
        out[version] = _Candidate(version, f"v{version}", False, tuple(offers), {}, (), True, pin.get("abi"))
    return out


def abi_assets_needed(recipe: Mapping[str, Any], releases: Sequence[ReleaseLike],
                      platform: str) -> list[tuple[ReleaseLike, AssetLike]]:
    """The ABI assets the workflow must read before ``resolve_basert`` can choose: those of every
    release with a bundle for ``platform`` (newest first)."""
    needed: list[tuple[ReleaseLike, AssetLike]] = []
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
                   repo: str = "basecompute/baseRT", url_for: Callable[[str, str], str] | None = None) -> list[Plan]:
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
    cands = _candidates(recipe, releases, url_for)
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
        fault = f"has no bundle for {host.platform}" if request.version in cands else "is not published"
        drivable = best.cand.version if best else "none"
        raise NotInstallable(f"baseRT {request.version} {fault} (the newest this superfluid drives here is {drivable})",
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
    backend = request.backend or backend or default_backend(host.platform)
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
            line: str | None = None, planner: Callable[..., list[Plan]] | None = None,
            repo: str = "basecompute/baseRT", url_for: Callable[[str, str], str] | None = None) -> list[Plan]:
    """The ordered plans for ``request`` on ``host``: one rule per runtime (SPEC §4). ``url_for(tag,
    name)`` places an asset the listing lacks (a recipe pin) at the source.

    Raises:
        NotInstallable, InconsistentRelease, DigestConflict, UsageError: as the rule for the runtime.
    """
    if request.id == "basert":
        if request.from_:
            return resolve_from(request, recipe, host, _basert_name)
        if drives is None:
            raise ValueError("resolve: basert needs the ABI number this build drives")
        return resolve_basert(request, recipe, host, releases, abi_texts or {}, drives=drives, line=line, repo=repo,
                              url_for=url_for)
    if planner is None:
        raise NotInstallable(f"this superfluid has no installer for the {request.id} runtime")
    return planner(request, recipe, host, releases)
