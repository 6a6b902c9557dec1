"""``superfluid mirror push oci://HOST/REPO --lock FILE``: every file a lock names, into a registry.

See docs/fleet.md, "From the registry you already run".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from superfluid.installer.cache.download import download
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.fleet.lockfile import Engine, Lock, LockedFile, LockFileError
from superfluid.installer.fleet.sync import fetch_files, files_of, listing, provable
from superfluid.installer.settings import Settings
from superfluid.installer.sources.bundles import BUNDLE_TYPE
from superfluid.installer.sources.mirror import listing_path
from superfluid.installer.sources.oci.client import Registry, registry_for
from superfluid.installer.sources.oci.ref import (
    ARTIFACT_TYPE,
    EMPTY_CONFIG,
    INDEX_MEDIA_TYPE,
    INDEX_TYPE,
    Layer,
    OciRef,
    Referrer,
    asset_manifest,
    engine_tag,
    index_tag,
    is_oci,
    manifest,
    parse_referrers,
    ref_of_url,
    referrer_manifest,
    referrers_index,
    referrers_tag,
)
from superfluid.installer.transport.progress import Progress
from superfluid.installer.trust.proving import proving_bundle
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = ["Pushed", "push", "engine_manifests", "refer"]

_LISTING_MAX_BYTES = 64 << 20


@dataclass(kw_only=True, frozen=True, slots=True)
class Pushed:
    """What a push did: the engine tags and index tags the registry holds now; the blobs sent
    (mirror paths) and found there; the bytes sent; the manifests sent and found in place."""

    tags: tuple[str, ...]
    indexes: tuple[str, ...]
    sent: tuple[str, ...]
    present: tuple[str, ...]
    bytes_sent: int
    manifests_sent: int
    manifests_present: int
    #: the assets whose Sigstore bundle was pushed as a referrer of the asset's own manifest (mirror paths)
    bundles: tuple[str, ...] = ()


def _listing(net: Registry, lock: Lock, repo: str) -> bytes:
    """``releases.json`` of ``repo`` as this push leaves it: the registry's, with the lock's releases
    and files merged in (rendered as ``mirror sync`` writes it).

    Raises:
        BadFile: the registry's listing is not a JSON array of releases.
        VerificationError: the registry's listing is not the bytes its index names.
    """
    where = listing_path(repo)
    old = net.index(repo).get(where)
    existing: Any = []
    if old is not None:
        try:
            existing = loads(net.blob(old.sha256, max_bytes=_LISTING_MAX_BYTES), max_bytes=_LISTING_MAX_BYTES)
        except UntrustedJson as e:
            existing = e  # named below
        if not isinstance(existing, list) or not all(isinstance(r, dict) for r in existing):
            raise BadFile(f"{net.ref.describe()}:{index_tag(repo)} {where}", "is not a JSON array of release objects",
                          advice=f"retag or delete {index_tag(repo)} in the registry; the next push writes it anew")
    return (json.dumps(listing(lock, repo, existing), indent=1) + "\n").encode("utf-8")


def engine_manifests(lock: Lock, listings: Mapping[str, bytes]) -> dict[str, bytes]:
    """Each engine install's manifest by tag: its files, then its repository's listing (an install
    two kinds of machine share is one manifest)."""
    by_tag: dict[str, tuple[Engine, dict[str, Layer]]] = {}
    for e in lock.engines:
        tag = engine_tag(e.target.runtime, e.version, e.target.platform, e.backend)
        _, layers = by_tag.setdefault(tag, (e, {}))
        for f in e.files():
            layers.setdefault(f.path, Layer(f.path, f.sha256, f.size))
    out: dict[str, bytes] = {}
    for tag, (e, layers) in sorted(by_tag.items()):
        body = listings[e.repo]
        listed = Layer(listing_path(e.repo), hashlib.sha256(body).hexdigest(), len(body))
        notes = {"superfluid.runtime": e.target.runtime, "superfluid.version": e.version,
                 "superfluid.platform": e.target.platform, "superfluid.backend": e.backend,
                 "superfluid.repo": e.repo}
        out[tag] = manifest([*layers.values(), listed], artifact_type=ARTIFACT_TYPE, annotations=notes)
    return out


def _index(net: Registry, lock: Lock, repo: str, body: bytes) -> bytes:
    """The index of ``repo``: every file the registry's index named, the lock's files of ``repo``
    (its digests win) and the listing, sorted by path."""
    layers = dict(net.index(repo))
    for e in lock.engines:
        if e.repo == repo:
            layers.update((f.path, Layer(f.path, f.sha256, f.size)) for f in e.files())
    where = listing_path(repo)
    layers[where] = Layer(where, hashlib.sha256(body).hexdigest(), len(body))
    return manifest([layers[t] for t in sorted(layers)], artifact_type=INDEX_TYPE,
                    annotations={"superfluid.repo": repo})


def _local_copies(files: Sequence[LockedFile], *, settings: Settings, progress: Progress | None,
                  config: FetchConfig) -> list[Path]:
    """Each file's verified bytes in the home's cache, fetched from the lock's URL (a registry's
    too, by digest), in order."""
    plain = [f for f in files if not is_oci(f.url)]
    got: dict[str, Path] = dict(zip((str(f.sha256) for f in plain), fetch_files(plain, settings=settings,
                                                                                 progress=progress), strict=True))
    for f in files:
        if is_oci(f.url):
            got[f.sha256] = _from_registry(f, settings=settings, progress=progress, config=config)
    return [got[f.sha256] for f in files]


def _from_registry(f: LockedFile, *, settings: Settings, progress: Progress | None,
                   config: FetchConfig) -> Path:
    ref = ref_of_url(f.url, plain_http=config.oci_plain_http)
    if ref is None:
        raise LockFileError(f"{f.name}: {f.url} names no registry repository", advice="lock it again")
    net = registry_for(ref, settings, config)
    try:
        return download(f.url, f.sha256, f.size, cache=Cache.for_home(settings.home),
                        fetcher=net.fetcher({f.url: f.sha256}), progress=progress, name=f.name).path
    finally:
        net.close()


def push(lock: Lock, ref: OciRef, settings: Settings, *, progress: Progress | None = None,
         tell: Callable[[str], None] | None = None, registry: Registry | None = None) -> Pushed:
    """Push every file ``lock`` names to ``ref`` (see the module doc), through ``registry`` (default
    ``registry_for``'s; a lock's ``oci://`` files are read with its config's ``oci_plain_http``, else
    ``settings.fetch``'s).

    Raises:
        BadFile: the auth file, or a listing or index the registry holds, is broken (nothing sent).
        VerificationError: a file fetched for the push is not the locked bytes (nothing of it sent).
        DownloadError: the registry refused, or a transfer failed after the retries (what was sent
            stays: a push again sends the rest).
    """
    config = registry.config if registry is not None else settings.fetch
    tell = tell or (lambda _line: None)
    net = registry or registry_for(ref, settings, config, push=True)
    try:
        files = [f for _, _, f in files_of(lock)]
        repos = sorted({e.repo for e in lock.engines})
        listings = {repo: _listing(net, lock, repo) for repo in repos}  # a broken one refused before any write
        blobs: dict[str, tuple[str, int, LockedFile | bytes]] = {}
        for f in files:
            blobs.setdefault(f.sha256, (f.path, f.size, f))
        for repo, body in listings.items():
            blobs.setdefault(hashlib.sha256(body).hexdigest(), (listing_path(repo), len(body), body))
        blobs.setdefault(hashlib.sha256(EMPTY_CONFIG).hexdigest(), ("(the empty config)", 2, EMPTY_CONFIG))
        missing = {sha: b for sha, b in blobs.items() if not net.has_blob(sha)}
        present = [b[0] for sha, b in blobs.items() if sha not in missing]
        fetch = [src for _, _, src in missing.values() if isinstance(src, LockedFile)]
        copies = _local_copies(fetch, settings=settings, progress=progress, config=config)
        local: dict[str, Path] = dict(zip((str(f.sha256) for f in fetch), copies, strict=True))
        sent = 0
        for sha, (title, size, src) in missing.items():
            tell(f"sending {title} ({size} bytes) to {ref.describe()}")
            net.upload(sha, size, local[sha] if isinstance(src, LockedFile) else src, progress=progress,
                       name=title.rsplit("/", 1)[-1])
            sent += size
        pushed = _push_bundles(net, lock, settings, {b[0] for b in missing.values()}, tell)
        manifests = engine_manifests(lock, listings)
        indexes = {index_tag(repo): _index(net, lock, repo, listings[repo]) for repo in repos}
        written = 0
        for tag, body in [*manifests.items(), *indexes.items()]:
            if net.has_manifest(tag, hashlib.sha256(body).hexdigest()):
                continue
            tell(f"tagging {ref.describe()}:{tag}")
            net.put_manifest(tag, body)
            written += 1
    finally:
        if registry is None:
            net.close()
    total = len(manifests) + len(indexes)
    return Pushed(tags=tuple(manifests), indexes=tuple(indexes), sent=tuple(b[0] for b in missing.values()),
                  present=tuple(present), bytes_sent=sent,
                  manifests_sent=written, manifests_present=total - written, bundles=pushed)


def _push_bundles(net: Registry, lock: Lock, settings: Settings, sent: set[str],
                  tell: Callable[[str], None]) -> tuple[str, ...]:
    """For each asset this push ``sent``, its Sigstore bundle as a referrer of the asset's own manifest
    (``ref.asset_manifest``), as cosign and ``gh attestation`` keep one: found where the lock found the
    asset (GitHub's attestations, a mirror's file) and pushed only when it proves the asset was built
    by the engine's identity (the lock's, else the recipe's). An asset with none, or already in the
    registry, is not asked (a second push asks nothing). Answers the mirror paths of the assets.

    Raises:
        ProvenanceRefused: a bundle found does not prove its asset (nothing of it pushed).
        DownloadError: the registry refused, or asking failed.
    """
    done: list[str] = []
    for f, built_by in provable(lock):
        if f.path not in sent or f.path in done:
            continue
        proof = proving_bundle(f.name, f.url, f.sha256, built_by, settings)
        if proof is None or proof.bundle is None:
            continue
        tell(f"sending the Sigstore bundle of {f.path} to {net.ref.describe()}")
        refer(net, asset_manifest(Layer(f.path, f.sha256, f.size)), proof.bundle.data)
        done.append(f.path)
    return tuple(done)


def refer(net: Registry, subject: bytes, bundle: bytes) -> None:
    """``bundle`` pushed as a referrer of the manifest ``subject`` (pushed too, untagged): its blob, its
    manifest, and, where the registry keeps no referrers itself (no ``OCI-Subject`` in its answer),
    the referrers tag's index with it added (OCI distribution 1.1)."""
    sha = hashlib.sha256(bundle).hexdigest()
    if not net.has_blob(sha):
        net.upload(sha, len(bundle), bundle, name="sigstore.json")
    empty = hashlib.sha256(EMPTY_CONFIG).hexdigest()
    if not net.has_blob(empty):
        net.upload(empty, len(EMPTY_CONFIG), EMPTY_CONFIG, name="config")
    net.put_manifest_by_digest(subject)
    referrer = referrer_manifest(sha, len(bundle), subject, bundle_type=BUNDLE_TYPE)
    reply = net.put_manifest_by_digest(referrer)
    if reply.headers.get("oci-subject"):
        return
    subject_sha = hashlib.sha256(subject).hexdigest()
    tag = referrers_tag(subject_sha)
    known = net.manifest(tag, accept=INDEX_MEDIA_TYPE)
    listed = parse_referrers(known[0], f"{net.ref.describe()}:{tag}") if known is not None else []
    mine = Referrer(hashlib.sha256(referrer).hexdigest(), len(referrer), BUNDLE_TYPE)
    if mine not in listed:
        net.put_manifest(tag, referrers_index([*listed, mine]), INDEX_MEDIA_TYPE)
