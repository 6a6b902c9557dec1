"""A plan's assets proven before anything is staged, each against its digest and the plan's ``built_by``.

See docs/install.md, "Provenance".
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

from superfluid.installer.errors import DownloadError, ProvenanceRefused, ProvenanceRequired
from superfluid.installer.sources.bundles import SUFFIX, Bundles, Found, bundle_file
from superfluid.installer.sources.choose import bundles_at
from superfluid.installer.sources.release import Asset
from superfluid.installer.trust.identity import Identity

if TYPE_CHECKING:
    from superfluid.installer.settings import Settings
    from superfluid.installer.sources.release_source import ReleaseSource
    from superfluid.installer.trust.provenance import Provenance, Root
    from superfluid.runtime.planning import Plan, PlanAsset

# Each asset's Sigstore bundles are asked of its source and verified against the digest the plan already
# knows, for the identity the plan names (``Plan.built_by``). An asset whose source holds no bundle
# installs as before ("no provenance"), unless provenance is required (``--require-provenance``, a lock's
# ``provenance = "required"``): then it is refused. A bundle that is there and does not prove it is always
# a refusal, never a warning.
#
# The verifier (``provenance``, the one module that imports sigstore: about a second to import) is
# imported by name here, and only when an asset has a bundle (``_load_root``, ``_verify``): an install of
# assets without bundles, and every command that verifies nothing, never loads it. It is sigstore's
# wrapper, imported where used as the heavy third-party libraries are (docs/architecture.md).
__all__ = ["KEPT", "Proof", "Proofs", "prove", "proof_of", "proving_bundle", "proves", "kept_path", "verify_kept",
           "keep_again", "unproven"]

#: where an install keeps the bundles that proved its assets (below the install)
KEPT = ".superfluid/provenance"
_VERIFIER = "superfluid.installer.trust.provenance"


def kept_path(asset: str) -> str:
    """Where the bundle of ``asset`` is kept below an install: ``.superfluid/provenance/<asset>.sigstore.json``."""
    return f"{KEPT}/{asset}{SUFFIX}"


@dataclass(frozen=True, slots=True)
class Proof:
    """One asset's provenance: what its bundle proved (None: no bundle was found), the bundle's bytes
    and where they came from; ``unasked``: why its source could not be asked (unreachable: taken as no
    bundle, as a source that answers "none" could say as well)."""

    name: str
    sha256: str
    proven: Provenance | None = None
    bundle: Found | None = None
    unasked: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "sha256": self.sha256,
                               "proven": self.proven.to_json() if self.proven is not None else None}
        if self.bundle is not None:
            out.update(bundle=kept_path(self.name), found_at=self.bundle.where)
        if self.unasked is not None:
            out["unasked"] = self.unasked
        return out


@dataclass(frozen=True, slots=True)
class Proofs:
    """A plan's provenance: the identity asked, the trusted root file its bundles were verified under
    (``SUPERFLUID_SIGSTORE_ROOT``; None: the public Sigstore's, or no asset had a bundle), and each
    asset's ``Proof``."""

    built_by: Mapping[str, str | None] | None
    trust_root: str | None
    assets: tuple[Proof, ...]

    @property
    def proven(self) -> bool:
        """Every asset proven by its bundle."""
        return bool(self.assets) and all(p.proven is not None for p in self.assets)

    def kept(self) -> dict[str, bytes]:
        """The bundles an install keeps, by their path below it (``kept_path``)."""
        return {kept_path(p.name): p.bundle.data for p in self.assets if p.bundle is not None and p.proven}

    def to_json(self) -> dict[str, Any]:
        """The receipt's ``provenance`` (schema ``runtime``)."""
        return {"built_by": dict(self.built_by) if self.built_by is not None else None,
                "trust_root": self.trust_root, "assets": [p.to_json() for p in self.assets]}

    def describe(self) -> str:
        """One line: who built it, as proven, or that nothing was proven."""
        proven = [p.proven for p in self.assets if p.proven is not None]
        unasked = next((p.unasked for p in self.assets if p.unasked is not None), None)
        if not proven and unasked is not None:
            return f"no provenance (its Sigstore bundle could not be asked for: {unasked})"
        if not proven:
            return "no provenance (no Sigstore bundle was published for it)"
        first = proven[0]
        words = f"built by {first.repository} {first.workflow} at {first.ref} ({first.run_url})"
        return words if self.proven else f"{words}; no provenance for the rest of its archives"


def unproven(p: Plan) -> Proofs:
    """The provenance of a plan nothing was asked for (a ``--from`` file): none."""
    return Proofs(p.built_by, None, tuple(Proof(a.name, a.sha256 or "") for a in p.assets))


def _required(a: PlanAsset, bundles: Bundles, built_by: str, unasked: str | None) -> ProvenanceRequired:
    none = (f"its Sigstore bundle could not be asked for ({unasked})" if unasked is not None
            else f"{bundles.where} holds no Sigstore bundle for it (sha256 {a.sha256})")
    return ProvenanceRequired(
        f"{a.name}: no provenance, and it is required: {none}",
        advice=f"install it only from where its attestation is published (GitHub's attestations of {built_by}, "
               f"or a mirror that holds {a.name}{SUFFIX} beside it), or install without requiring provenance")


def prove(p: Plan, source: ReleaseSource | None, settings: Settings) -> Proofs:
    """Each of ``p``'s assets proven by the bundles its source holds for it, before any byte of it is
    staged: verified against the digest ``p`` settled, for the identity ``p.built_by`` names, under
    ``settings.sigstore_root`` (None: the public Sigstore's root). ``source`` None: each asset's bundles
    are where its URL says (``choose.bundles_at``: a lock's files). A plan that names no identity (a
    ``--from`` file) asks nothing.

    Raises:
        ProvenanceRefused: a bundle is there and none of an asset's proves it (names the asset, the
            identity wanted and the one found, or the step that failed).
        ProvenanceRequired: ``settings.require_provenance`` and an asset has no bundle.
        BadFile: the trusted root named cannot be read.
    """
    if p.built_by is None:
        if settings.require_provenance:
            raise ProvenanceRequired(f"{p.id} {p.install}: no provenance, and it is required: a file named by hand "
                                     "(--from) names no release workflow to prove it was built by",
                                     advice="install it from its release, whose attestation proves who built it")
        return unproven(p)
    try:
        wanted = Identity.from_json(p.built_by)
    except ValueError as e:  # a --for document's or a hand-edited lock's, past its schema
        raise ProvenanceRefused(f"{p.id} {p.install}", "identity", f"names no identity a bundle can prove: {e}",
                                advice="name who builds it as its recipe does (built_by: repository, workflow, "
                                       "ref)") from None
    root: Root | None = None
    proofs = []
    for a in p.assets:
        if a.sha256 is None:  # an asset not in this release: the installer skips the plan
            proofs.append(Proof(a.name, ""))
            continue
        bundles, unasked = _bundles_of(a, a.sha256, wanted, source, settings)
        if not bundles.found:
            if settings.require_provenance:
                raise _required(a, bundles, str(wanted), unasked)
            proofs.append(Proof(a.name, a.sha256, unasked=unasked))
            continue
        root = root or _load_root(settings.sigstore_root)
        proven, found = _first_proof(a.name, a.sha256, bundles, wanted, root)
        proofs.append(Proof(a.name, a.sha256, proven, found))
    return Proofs(p.built_by, settings.sigstore_root if root is not None else None, tuple(proofs))


def _bundles_of(a: PlanAsset, sha256: str, wanted: Identity, source: ReleaseSource | None,
                settings: Settings) -> tuple[Bundles, str | None]:
    """The bundles of ``a`` where its source (or, with none, its URL) keeps them; a source that cannot
    be asked (unreachable, refusing: a ``DownloadError``) is taken as holding none, and why is answered:
    a source that answers "none" could say as much, and an asset without a bundle installs unproven
    anyway (its archive may come from the cache), unless provenance is required.

    Raises:
        ProvenanceRefused: what is there is not a bundle to read.
    """
    try:
        # the repository whose workflow attests it holds its attestations (GitHub's API is asked there); a
        # lock's file is fetched from its URL, with no source: its bundles are where that URL says
        if source is not None:
            return source.bundles(wanted.repository, Asset(a.name, a.url, a.size, f"sha256:{sha256}"), sha256), None
        return bundles_at(a.url, wanted.repository, sha256, settings), None
    except DownloadError as e:
        return Bundles((), e.url), e.message


def _load_root(path: str | None) -> Root:
    root: Root = import_module(_VERIFIER).load_root(path)
    return root


def _verify(sha256: str, data: bytes, wanted: Identity, root: Root, *, named: str, subject: str) -> Provenance:
    proven: Provenance = import_module(_VERIFIER).verify(sha256, data, wanted, root, named=named, subject=subject)
    return proven


def proof_of(name: str, sha256: str, bundles: Bundles, built_by: Mapping[str, str | None],
             settings: Settings) -> Proof:
    """What the first of ``bundles`` that proves file ``name`` (``sha256``) was built by ``built_by``
    proves, under ``settings.sigstore_root`` (``mirror sync`` copies that bundle, and only one that proves).

    Raises:
        ProvenanceRefused: ``bundles`` holds none, or none proves it (as ``prove``).
        BadFile: the trusted root named cannot be read.
    """
    if not bundles.found:
        raise ProvenanceRefused(name, "bundle", f"{bundles.where} holds no Sigstore bundle for it")
    proven, found = _first_proof(name, sha256, bundles, Identity.from_json(built_by),
                                 _load_root(settings.sigstore_root))
    return Proof(name, sha256, proven, found)


def proving_bundle(name: str, url: str, sha256: str, built_by: Mapping[str, str | None],
                   settings: Settings) -> Proof | None:
    """The bundle that proves the file ``name`` at ``url`` (``sha256``) was built by ``built_by``, found
    where an install finds it (``bundles_at``), or None where there is none: what ``mirror sync`` places
    beside a file and ``mirror push`` sends as its referrer.

    Raises:
        ProvenanceRefused: bundles are there and none proves it (as ``proof_of``).
        DownloadError: as ``bundles_at``.
    """
    bundles = bundles_at(url, str(built_by["repository"]), sha256, settings)
    if not bundles.found:
        return None
    return proof_of(name, sha256, bundles, built_by, settings)


def proves(name: str, sha256: str, bundle: Found, built_by: Mapping[str, str | None], settings: Settings) -> Provenance:
    """What ``bundle`` proves of file ``name`` (``sha256``), built by ``built_by``, under
    ``settings.sigstore_root`` (``mirror verify`` checks each bundle beside an asset so).

    Raises:
        ProvenanceRefused: it does not prove it: the step's fault, named by where the bundle is.
        BadFile: the trusted root named cannot be read.
        ValueError: ``built_by`` is no identity.
    """
    wanted = Identity.from_json(built_by)
    return _verify(sha256, bundle.data, wanted, _load_root(settings.sigstore_root), named=bundle.where, subject=name)


def _first_proof(name: str, sha256: str, bundles: Bundles, wanted: Identity,
                 root: Root) -> tuple[Provenance, Found]:
    """The first of ``bundles`` that proves file ``name`` (an answer may list an asset's attestations of
    other predicates, an SBOM's, beside its provenance), and the bundle.

    Raises:
        ProvenanceRefused: none proves it: the first one's refusal, said of the asset.
    """
    refusals: list[ProvenanceRefused] = []
    for found in bundles.found:
        try:
            return _verify(sha256, found.data, wanted, root, named=found.where, subject=name), found
        except ProvenanceRefused as e:
            refusals.append(e)
    first = refusals[0]
    more = f"; none of the {len(refusals)} bundles it holds proves it" if len(refusals) > 1 else ""
    if bundles.cut:
        more += f" (the first {len(bundles.found)} of the {bundles.listed} attestations it lists were examined)"
    raise ProvenanceRefused(name, first.step, f"its Sigstore bundle does not prove it was built by {wanted}: "
                            f"{first.fault} [bundle: {first.named}]{more}; nothing was installed",
                            wanted=str(wanted), found=first.found)


def _proven_assets(recorded: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The assets a receipt's ``provenance`` records proven (``Proof.to_json`` with ``proven`` set)."""
    return [a for a in recorded.get("assets") or () if isinstance(a, Mapping) and isinstance(a.get("proven"), Mapping)]


def verify_kept(install: str, recorded: Mapping[str, Any]) -> list[Provenance]:
    """The bundles the install at ``install`` keeps, verified again, offline, against what its receipt's
    ``provenance`` (``recorded``: ``Proofs.to_json``) says they proved: each proven asset's digest, the
    identity asked, the trusted root file they were verified under (None: the public Sigstore's).

    Raises:
        ProvenanceRefused: a kept bundle is missing, is not a regular file, or no longer proves what was
            recorded (altered, or another asset's).
        BadFile: the trusted root recorded cannot be read.
        ValueError: the record names no identity.
    """
    assets = _proven_assets(recorded)
    if not assets:
        return []
    wanted = Identity.from_json(recorded.get("built_by"))
    root = _load_root(recorded.get("trust_root"))
    out = []
    for a in assets:
        name = str(a["name"])
        path = os.path.join(install, kept_path(name))
        kept = bundle_file(path)
        if not kept.found:
            raise ProvenanceRefused(path, "bundle", f"is missing: the bundle that proved {name} is no longer kept")
        out.append(_verify(str(a["sha256"]), kept.found[0].data, wanted, root, named=path, subject=name))
    return out


def keep_again(install: str, recorded: Mapping[str, Any], p: Plan, settings: Settings) -> dict[str, bytes]:
    """The bundles a repair of the install at ``install`` keeps, by their path below it (``kept_path``): for
    each asset its receipt's ``provenance`` (``recorded``) records proven, the bundle that proved it. That is
    the one the install keeps when its bytes are the ones recorded (``bundle_sha256``); else (missing,
    altered, not a regular file) the one of those bytes its source holds, asked as an install asks for it
    (``choose.bundles_at`` of the URL ``p``, the repair's plan, fetches the asset from). Either is verified
    again, against the asset's recorded digest and the identity asked, under the trusted root recorded,
    before anything is staged: a repair puts back the files and the provenance its receipt records, or
    nothing.

    Raises:
        ProvenanceRefused: the bundle recorded is not to be had again (its source cannot be asked, or holds
            no bundle of those bytes), or it no longer proves the asset; the record names no identity.
        BadFile: the trusted root recorded cannot be read.
    """
    assets = _proven_assets(recorded)
    if not assets:
        return {}
    try:
        wanted = Identity.from_json(recorded.get("built_by"))
    except ValueError as e:
        raise ProvenanceRefused(install, "identity", f"its receipt's provenance names no identity a bundle can "
                                                     f"prove ({e}); nothing was changed") from None
    root = _load_root(recorded.get("trust_root"))
    by_digest: dict[str, PlanAsset] = {a.sha256: a for a in p.assets if a.sha256 is not None}
    kept = {}
    for a in assets:
        name, sha256 = str(a["name"]), str(a["sha256"])
        path = os.path.join(install, kept_path(name))
        data, why = _as_recorded(path, str(a["proven"].get("bundle_sha256")))
        if data is None:
            data = _again(path, why, by_digest.get(sha256), wanted, str(a["proven"].get("bundle_sha256")), settings)
        try:
            _verify(sha256, data, wanted, root, named=path, subject=name)
        except ProvenanceRefused as e:
            raise ProvenanceRefused(e.named, e.step, f"{e.fault}; nothing was changed", wanted=e.wanted,
                                    found=e.found) from None
        kept[kept_path(name)] = data
    return kept


def _as_recorded(path: str, bundle_sha256: str) -> tuple[bytes | None, str]:
    """The bytes of the bundle kept at ``path`` when they are the ones its receipt records proved
    (``bundle_sha256``), else None and why not."""
    try:
        found = bundle_file(path).found
    except ProvenanceRefused as e:  # a link, a FIFO: never read; the source is asked
        return None, e.fault
    if not found:
        return None, "is missing"
    got = hashlib.sha256(found[0].data).hexdigest()
    if got != bundle_sha256:
        return None, (f"is not the Sigstore bundle its receipt records (its SHA-256 is {got}; the receipt "
                      f"records {bundle_sha256})")
    return found[0].data, ""


def _again(path: str, why: str, a: PlanAsset | None, wanted: Identity, bundle_sha256: str,
           settings: Settings) -> bytes:
    """The bundle of ``bundle_sha256`` that proved ``a``, asked of its source again (the one kept at
    ``path`` is not it: ``why``).

    Raises:
        ProvenanceRefused: the source cannot be asked, or holds no bundle of those bytes.
    """
    if a is None or a.sha256 is None:
        where = "its receipt names no archive of its digest to ask for it again"
    else:
        bundles, unasked = _bundles_of(a, a.sha256, wanted, None, settings)
        for found in bundles.found:
            if hashlib.sha256(found.data).hexdigest() == bundle_sha256:
                return found.data
        where = (f"its source could not be asked for it again ({unasked})" if unasked is not None
                 else f"{bundles.where} holds no bundle of those bytes")
    raise ProvenanceRefused(path, "bundle", f"{why}, and {where}; nothing was changed",
                            advice="a repair puts back the bundle that proved the install with its files: repair it "
                                   "where its source can be reached, or install it again to prove it anew")
