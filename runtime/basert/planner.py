"""Which baseRT bundles install here: request + recipe + host + listing -> ordered plans.

See docs/install.md, "baseRT: by ABI number".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from superfluid.runtime.basert.abi import AbiVerdict, abi_verdict, anyway
from superfluid.runtime.basert.bundles import Bundle, default_backend, parse_abi_asset_name, parse_bundle_name
from superfluid.runtime.digests import api_sha256, expected_digest
from superfluid.runtime.from_archive import NameFacts, plan_from
from superfluid.runtime.hostfacts.needs import NEEDS_SUFFIX, InvalidNeeds, Needs, judge
from superfluid.runtime.kernel.errors import InconsistentRelease
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.ordering import backend_family, backend_rank, version_key
from superfluid.runtime.planning import (
    Listing,
    NotInstallable,
    Plan,
    PlanAsset,
    ReleaseLike,
    Request,
    Sha256,
    backend_runs_here,
    parse_sha256,
)

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host

__all__ = ["read_abi_asset", "read_needs", "release_abi", "plan"]

_REPO = "basecompute/baseRT"


def read_abi_asset(repo: str, tag: str, name: str, text: str) -> int:
    """The ABI number a ``basert-engine-abi-<N>.txt`` states.

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
            advice="the release contradicts itself: report it to its publisher; nothing of it is installed",
        )
    return n


def release_abi(repo: str, tag: str, abi_texts: Mapping[str, str], pin_abi: int | None,
                pinned: bool) -> tuple[int | None, str | None]:
    """A release's ABI number and where it was read: ``(N, "asset")``, ``(N, "pin")`` or
    ``(None, None)`` when the release states none.

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


# -- the candidates -----------------------------------------------------------------------------------


class _Offer(NamedTuple):
    """One bundle a candidate release offers, with what the listing and the recipe say of it."""

    bundle: Bundle
    url: str
    size: int | None
    api: Sha256 | None  # the listing's digest
    pin: Sha256 | None  # the recipe's digest
    pinned: bool  # the recipe pins this very asset (by name)


class _Candidate(NamedTuple):
    version: str
    tag: str
    prerelease: bool
    offers: tuple[_Offer, ...]
    sidecars: Mapping[str, str]  # bundle name -> URL of its .sha256
    release: ReleaseLike | None  # None: known from the recipe alone
    pinned: bool
    pin_abi: int | None


def _version_of_tag(tag: str) -> str:
    return tag[1:] if tag[:1] in ("v", "V") and tag[1:2].isdigit() else tag


def _pins(recipe: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(p["version"]): p for p in recipe.get("pinned", []) if isinstance(p, Mapping) and "version" in p}


def _listed(rel: ReleaseLike, pin: Mapping[str, Any] | None) -> _Candidate:
    version = _version_of_tag(rel.tag)
    names = {a.name: a for a in rel.assets}
    pinned_assets = {str(a["name"]): a for a in (pin or {}).get("assets", [])}
    offers = []
    for a in rel.assets:
        b = parse_bundle_name(a.name)
        if b is None or b.version != version:
            continue
        pa = pinned_assets.get(a.name)
        size = int(pa["size"]) if pa and pa.get("size") is not None else a.size
        offers.append(_Offer(b, a.url, size, api_sha256(a.digest), parse_sha256((pa or {}).get("sha256")),
                             pa is not None))
    sidecars = {o.bundle.name: names[o.bundle.name + ".sha256"].url for o in offers
                if o.bundle.name + ".sha256" in names}
    return _Candidate(version, rel.tag, bool(rel.prerelease), tuple(offers), sidecars, rel, pin is not None,
                      (pin or {}).get("abi"))


def _candidates(recipe: Mapping[str, Any], listing: Listing | None) -> dict[str, _Candidate]:
    """Every version the listing or the recipe knows, with its bundles. A listed release offers
    what it lists (a pin adds its digest and ABI); a pinned version the listing lacks is offered
    where the listing places it (without a listing: at the recipe's URL), its ABI from the pin."""
    pins = _pins(recipe)
    out: dict[str, _Candidate] = {}
    for rel in listing.releases() if listing is not None else ():
        version = _version_of_tag(rel.tag)
        if version not in out:  # a repeated tag: the first listed wins
            out[version] = _listed(rel, pins.get(version))
    template = str(recipe.get("release") or "{name}")
    for version, pin in pins.items():
        if version in out:
            continue
        offers = []
        for a in pin.get("assets", []):
            b = parse_bundle_name(str(a["name"]))
            if b is not None:
                url = (listing.asset_url(f"v{version}", b.name) if listing is not None
                       else template.replace("{version}", version).replace("{name}", b.name))
                offers.append(_Offer(b, url, a.get("size"), None, parse_sha256(a.get("sha256")), True))
        out[version] = _Candidate(version, f"v{version}", False, tuple(offers), {}, None, True, pin.get("abi"))
    return out


# -- judging and planning -----------------------------------------------------------------------------


class _Judged(NamedTuple):
    cand: _Candidate
    rule: AbiVerdict | None  # None: the release contradicts itself (error)
    chosen_by: str | None  # None: not driven (installs only with --untested)
    why: str
    error: InconsistentRelease | None = None

    @property
    def abi(self) -> int | None:
        return self.rule.abi if self.rule else None


def _judge(cand: _Candidate, listing: Listing | None, drives: int, line: str | None) -> _Judged:
    repo = listing.repo if listing is not None else _REPO
    texts = {}
    if cand.release is not None and listing is not None:
        texts = {a.name: listing.text(cand.release, a) for a in cand.release.assets
                 if parse_abi_asset_name(a.name) is not None}
    try:
        abi, abi_from = release_abi(repo, cand.tag, texts, cand.pin_abi, cand.pinned)
    except InconsistentRelease as e:
        return _Judged(cand, None, None, str(e), e)
    rule = abi_verdict(cand.version, abi, drives=drives, line=line)
    chosen: str | None = rule.by
    why = rule.why
    if chosen is not None and abi_from == "asset":
        why += f" (basert-engine-abi-{abi}.txt)"
    if abi_from == "pin":
        chosen = "pin" if chosen else None
        why += " (as this superfluid's recipe pins it)"
    return _Judged(cand, rule, chosen, why)


def _runnable(cand: _Candidate, host: Host, backend: str | None) -> list[_Offer]:
    """The candidate's bundles for this platform that run here (or that ``--backend`` names),
    best backend first.

    Raises:
        NotInstallable: none does.
    """
    mine = [o for o in cand.offers if o.bundle.platform == host.platform]
    if backend is not None:
        runnable = [o for o in mine if backend in (o.bundle.backend, backend_family(o.bundle.backend))]
        if not runnable:
            have = ", ".join(sorted({o.bundle.backend for o in mine})) or "none"
            raise NotInstallable(f"baseRT {cand.version} has no {backend} bundle for {host.platform} "
                                 f"(it has: {have})", advice="name one of those with --backend, or leave --backend out")
    else:
        runnable = [o for o in mine if backend_runs_here(o.bundle.backend, o.bundle.platform, host) is None]
        if not runnable:
            reasons = "; ".join(f"{o.bundle.backend}: {backend_runs_here(o.bundle.backend, o.bundle.platform, host)}"
                                for o in mine)
            raise NotInstallable(f"no bundle of baseRT {cand.version} for {host.platform} runs on {host.describe()} "
                                 f"({reasons})", advice="name a backend with --backend to install one anyway")
    return sorted(runnable, key=lambda o: (backend_rank(o.bundle.backend), o.bundle.backend))


def read_needs(repo: str, tag: str, name: str, text: str) -> Needs:
    """What a bundle needs of a host, as ``<bundle>.needs.json`` (``ci/engine-assets`` writes it) states.

    Raises:
        InconsistentRelease: the asset is not a needs document (JSON of ``needs.Needs``).
    """
    try:
        return Needs.from_json(loads(text, max_bytes=1 << 16))
    except UntrustedJson as e:
        raise InconsistentRelease(repo, tag, f"is not JSON ({e.detail})", asset=name) from None
    except InvalidNeeds as e:
        raise InconsistentRelease(repo, tag, f"is not a needs document: {e}", asset=name) from None


def _needs_of(cand: _Candidate, name: str, listing: Listing | None) -> Needs | None:
    """What the release states bundle ``name`` needs (its ``<name>.needs.json``), read through the
    listing and checked against its digest; None when it states nothing (the extracted files are
    then measured before the probe)."""
    if listing is None or cand.release is None:
        return None
    asset = next((a for a in cand.release.assets if a.name == name + NEEDS_SUFFIX), None)
    if asset is None:
        return None
    return read_needs(listing.repo, cand.tag, asset.name, listing.text(cand.release, asset))


def _plans_for(judged: _Judged, host: Host, request: Request, untested: bool, listing: Listing | None) -> list[Plan]:
    """The plans of one chosen release: its bundles that run here, best backend first. Without a
    listing the release's digest statements are still to be read: provisional. A bundle whose
    ``<bundle>.needs.json`` this host does not meet is ``refused`` (shown, skipped before download).

    ``chosen_by`` is ``"pin"`` for a bundle the recipe pins by name, else how the release was
    judged (``"abi"``, ``"line"``), or ``"untested"``.
    """
    cand = judged.cand
    repo = listing.repo if listing is not None else None
    plans = []
    for o in _runnable(cand, host, request.backend):
        name = o.bundle.name
        sha, source, checked = expected_digest(name, pin=o.pin, flag=request.sha256, api=o.api,
                                               sidecar_pending=name in cand.sidecars or repo is None,
                                               require_sidecar=True,
                                               where=(repo or _REPO, cand.tag))
        asset = PlanAsset(name=name, url=o.url, sha256=sha, size=o.size, digest_source=source, checked=checked,
                          sidecar=cand.sidecars.get(name), api_sha256=o.api, pin=o.pin)
        if untested:
            chosen_by, why = "untested", f"{judged.why} (UNTESTED: installed with --untested)"
        elif o.pinned:
            chosen_by, why = "pin", f"{judged.why}; pinned in this superfluid's recipe"
        else:
            chosen_by, why = judged.chosen_by or "abi", judged.why
        needs = _needs_of(cand, name, listing)
        verdict = judge(needs, host, build=name) if needs is not None else None
        plans.append(Plan(id="basert", version=cand.version, backend=o.bundle.backend, assets=(asset,),
                          tested=not untested, chosen_by=chosen_by, abi=judged.abi,
                          why=f"{host.describe()}: {why}; the {o.bundle.backend} bundle", platform=host.platform,
                          needs=needs, refused=None if verdict is None or verdict.ok else str(verdict)))
    return plans


def _newest(judged: Sequence[_Judged]) -> _Judged | None:
    return max(judged, key=lambda j: version_key(j.cand.version), default=None)


def _read_name(recipe: Mapping[str, Any]) -> Callable[[str, str | None], NameFacts]:
    def read(name: str, version: str | None) -> NameFacts:
        b = parse_bundle_name(name)
        version = version or (b.version if b else None)
        pin = _pins(recipe).get(version or "")
        pinned = next((a for a in (pin or {}).get("assets", []) if a.get("name") == name), None)
        return NameFacts(platform=b.platform if b else None, backend=b.backend if b else None,
                         version=b.version if b else None,
                         pin=parse_sha256((pinned or {}).get("sha256")), size=(pinned or {}).get("size"),
                         abi=(pin or {}).get("abi"))
    return read


def plan(request: Request, recipe: Mapping[str, Any], host: Host, listing: Listing | None, *,
         drives: int, line: str | None) -> list[Plan]:
    """The ordered plans for ``request`` on ``host`` (see the module doc): the newest release this
    superfluid drives that has a bundle for this platform, or the one ``--version`` names; with
    ``--from``, that archive (``from_archive.plan_from``).

    A release whose ABI asset contradicts its name is never chosen; named, it is refused.
    Pre-releases are chosen only when named.

    Raises:
        NotInstallable: nothing the request names installs here; says what would instead.
        InconsistentRelease: the named release contradicts itself.
        DigestConflict: ``--sha256`` disagrees with a pin or the release.
        UsageError: ``--version`` disagrees with a ``--from`` archive's name.
    """
    if request.from_:
        return [plan_from(request, host, _read_name(recipe), default_backend=default_backend(host.platform))]
    cands = _candidates(recipe, listing)
    here = [c for c in cands.values() if any(o.bundle.platform == host.platform for o in c.offers)]
    judged = [_judge(c, listing, drives, line) for c in here]
    driven = [j for j in judged if j.chosen_by is not None and not j.cand.prerelease]
    best = _newest(driven)
    drives_what = f"ABI {drives}" + (f" (or the unnumbered {line}.x line)" if line else "")
    if request.version is None:
        if best is not None:
            return _plans_for(best, host, request, False, listing)
        if not here:
            platforms = sorted({o.bundle.platform for c in cands.values() for o in c.offers})
            # without a listing the candidates are the recipe's pins: say what it lists, not what
            # baseRT publishes (a mirror or a release may carry a bundle the recipe does not pin)
            where = ("baseRT publishes no bundle", "bundles exist") if listing is not None else \
                ("this superfluid's recipe pins no baseRT bundle", "it pins bundles")
            raise NotInstallable(
                f"{where[0]} for {host.platform} (this is {host.describe()}; {where[1]} for "
                f"{', '.join(platforms) or 'no platform'})",
                advice="use a mirror that carries one (--mirror URL|DIR), or --from PATH|URL with --sha256")
        newest = _newest([j for j in judged if j.error is None])
        instead = newest.cand.version if newest else None
        # a command to paste (the face adds the --mirror, --offline or --plain-http the user gave)
        raise NotInstallable(
            f"no baseRT release for {host.platform} states {drives_what}, the ABI this superfluid drives"
            + (f": the newest is {instead} ({newest.why})" if newest else ""), instead=instead,
            fix=anyway(instead) if instead else None)
    named = next((j for j in judged if j.cand.version == request.version), None)
    if named is None:
        fault = f"has no bundle for {host.platform}" if request.version in cands else "is not published"
        drivable = best.cand.version if best else "none"
        # the face adds the --mirror, --offline or --plain-http the user gave to the command (source_hints)
        raise NotInstallable(f"baseRT {request.version} {fault} (the newest this superfluid drives here is {drivable})",
                             instead=best.cand.version if best else None,
                             fix=Fix.superfluid("runtime", "versions", "basert",
                                                does="lists the versions that install here"),
                             advice=f"leave --version out to install {drivable}" if best else None)
    if named.error is not None:
        raise named.error
    if named.chosen_by is not None:
        return _plans_for(named, host, request, False, listing)
    instead = (f"the newest it drives is {best.cand.version}" if best
               else f"no release for {host.platform} states {drives_what}")
    if not request.untested:
        raise NotInstallable(f"{named.why}: {instead}", instead=best.cand.version if best else None,
                             fix=anyway(request.version))
    return _plans_for(named, host, request, True, listing)
