"""``superfluid mirror sync|verify DIR --lock FILE``: a static mirror of what a lock names.

See docs/fleet.md, "The mirror".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from superfluid.installer.cache.blobs import sha256_file
from superfluid.installer.cache.download import Wanted, download_many
from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import ProvenanceRefused
from superfluid.installer.files import writer_alive
from superfluid.installer.fleet.lockfile import Lock, LockedFile, LockFileError
from superfluid.installer.settings import Settings
from superfluid.installer.sources.bundles import SUFFIX, bundle_file
from superfluid.installer.sources.mirror import listing_path
from superfluid.installer.sources.release_source import fetcher_for
from superfluid.installer.transport.urls import origin_of
from superfluid.installer.trust.proving import proves, proving_bundle
from superfluid.runtime import registry
from superfluid.runtime.adapter import built_by_of
from superfluid.runtime.kernel.atomic import atomic_file, write_atomic
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_json
from superfluid.runtime.kernel.ordering import version_key

__all__ = ["Synced", "Problem", "files_of", "fetch_files", "sync", "verify", "listing", "provable"]

_LISTING_MAX_BYTES = 64 << 20
#: a temp file of a sync (``_temp_for``): the pid of its writer
_LEFTOVER = re.compile(r"\..+\.sync-(?P<pid>\d+)-[0-9a-f]{12}\.tmp")


@dataclass(frozen=True, slots=True)
class Synced:
    """What a sync did: paths fetched, found in place, replaced (they held other bytes), the listings
    written, and the Sigstore bundles placed beside their assets."""

    fetched: tuple[str, ...]
    present: tuple[str, ...]
    replaced: tuple[str, ...]
    listings: tuple[str, ...]
    bundles: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Problem:
    """One way a mirror differs from its lock: ``path`` (below the root) and what is wrong."""

    path: str
    fault: str


def files_of(lock: Lock) -> list[tuple[str, str, LockedFile]]:
    """Every file the lock names, once: ``(repo, tag, file)``, sorted by mirror path (the lock's
    reader already refused one path pinned to two digests)."""
    out: dict[str, tuple[str, str, LockedFile]] = {}
    for e in lock.engines:
        for f in e.files():
            out.setdefault(f.path, (e.repo, f.path.split("/")[4], f))
    return [out[p] for p in sorted(out)]


def _target(root: Path, path: str) -> Path:
    """``root/path``, refused when a link inside the mirror leads out of it.

    Raises:
        LockFileError: the resolved path is not below the root.
    """
    target = root / path
    real_root = os.path.realpath(root)
    if not os.path.realpath(target).startswith(real_root + os.sep):
        raise LockFileError(f"{target} leads out of the mirror {root} (through a symbolic link)",
                        advice="remove the link, or sync into another directory")
    return target


def _holds(path: Path, f: LockedFile) -> bool:
    try:
        return path.is_file() and path.stat().st_size == f.size and sha256_file(path) == f.sha256
    except OSError:
        return False


def _place(blob: Path, target: Path) -> None:
    """Copy a verified blob to ``target``, whole or not at all (``atomic_file``)."""

    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(target, temp=_temp_for(target)) as out, open(blob, "rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)


def fetch_files(files: Sequence[LockedFile], *, settings: Settings, progress: Any) -> list[Path]:
    """Each file's verified blob in the home's cache, fetched from its URL (one fetcher per origin)."""

    cache = Cache.for_home(settings.home)
    by_origin: dict[str, list[int]] = {}
    for i, f in enumerate(files):
        by_origin.setdefault(origin_of(f.url) if "://" in f.url else f.url, []).append(i)
    out: list[Path | None] = [None] * len(files)
    for indexes in by_origin.values():
        fetcher = fetcher_for(files[indexes[0]].url, settings.fetch, plain_http=True)
        try:
            done = download_many([Wanted(files[i].url, files[i].sha256, files[i].size, files[i].name)
                                  for i in indexes], cache=cache, fetcher=fetcher, progress=progress)
        finally:
            fetcher.close()
        for i, d in zip(indexes, done, strict=True):
            out[i] = d.path
    return [p for p in out if p is not None]


def sync(lock: Lock, root: str | os.PathLike[str], settings: Settings, *, progress: Any = None,
         tell: Callable[[str], None] | None = None) -> Synced:
    """Make ``root`` a mirror of every file ``lock`` names (see the module doc).

    Raises:
        BadFile: a listing already in ``root`` is not a JSON array of releases (nothing written).
        LockFileError: a link in ``root`` leads out of it.
        VerificationError, DownloadError: a file's bytes or its transfer (the files already placed stay).
        ProvenanceRefused: an asset's Sigstore bundle does not prove it (never placed; ``_place_bundles``).
        OSError: ``root`` cannot be written.
    """
    tell = tell or (lambda _line: None)
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    items = files_of(lock)
    repos = sorted({repo for repo, _, _ in items})
    listings = {repo: listing(lock, repo, _existing(base, repo)) for repo in repos}  # refused before any write
    _clean_leftovers([_target(base, f.path).parent for _, _, f in items]  # what a killed sync left
                     + [_listing_path(base, r).parent for r in repos])
    missing: list[LockedFile] = []
    present: list[str] = []
    replaced: list[str] = []
    for _, _, f in items:
        target = _target(base, f.path)
        if _holds(target, f):
            present.append(f.path)
            continue
        if target.exists():
            replaced.append(f.path)
        missing.append(f)
    for f in missing:
        tell(f"fetching {f.path} ({f.size} bytes) from {f.url}")
    for f, blob in zip(missing, fetch_files(missing, settings=settings, progress=progress), strict=True):
        _place(blob, _target(base, f.path))
    bundles = _place_bundles(lock, base, settings, tell, fetched={f.path for f in missing})
    written = []
    for repo, doc in listings.items():
        path = _listing_path(base, repo)
        text = json.dumps(doc, indent=1) + "\n"
        if not path.is_file() or path.read_text(encoding="utf-8", errors="replace") != text:
            _write_text(path, text)
            written.append(str(path.relative_to(base)))
    return Synced(tuple(f.path for f in missing), tuple(present), tuple(replaced), tuple(written), bundles)


def _place_bundles(lock: Lock, base: Path, settings: Settings, tell: Callable[[str], None], *,
                   fetched: set[str]) -> tuple[str, ...]:
    """Beside each asset this sync ``fetched``, its Sigstore bundle, ``<asset>.sigstore.json``, as an
    install from the mirror reads it: found where the lock found the asset (GitHub's attestations, the
    mirror's own file), and placed only when it proves the asset was built by the engine's identity
    (the lock's, else the recipe's), so a mirror never holds a bundle an install would refuse. An asset
    with none gets none; an asset already in place is asked again only when the bundle beside it does
    not prove it (``_bundle_fault``: one altered, a link, a FIFO; a sync that finds everything in place
    asks nothing). Answers the paths placed.

    Raises:
        ProvenanceRefused: a bundle found does not prove its asset.
        DownloadError: asking failed.
    """
    placed: list[str] = []
    for f, built_by in provable(lock):
        path = f.path + SUFFIX
        target = _target(base, path)
        if path in placed or (f.path not in fetched and _bundle_fault(base, f, built_by, settings) is None):
            continue
        proof = proving_bundle(f.name, f.url, f.sha256, built_by, settings)
        if proof is None or proof.bundle is None:
            continue
        tell(f"placing {path}: {f.name} built by {proof.proven.signer if proof.proven else '?'}")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, proof.bundle.data, temp=_temp_for(target))
        placed.append(path)
    return tuple(placed)


def provable(lock: Lock) -> Iterator[tuple[LockedFile, Mapping[str, str | None]]]:
    """Each asset of ``lock`` with the identity its Sigstore bundle must prove: the one the lock names for
    its engine, else its recipe's (a lock written before superfluid recorded it); none of an engine whose
    recipe names no releases repository (no identity to prove). What ``mirror sync`` places, ``mirror
    verify`` checks and ``mirror push`` sends."""
    for e in lock.engines:
        built_by = e.built_by or built_by_of(registry.get(e.target.runtime))
        if built_by is not None:
            yield from ((f, built_by) for f in e.assets)


def _listing_path(base: Path, repo: str) -> Path:
    return _target(base, listing_path(repo))


def _existing(base: Path, repo: str) -> list[Any]:
    path = _listing_path(base, repo)
    if not path.is_file():
        return []

    try:  # a regular file within the cap (a FIFO there is refused, not waited on); a mirror's links are its owner's
        doc = read_json(path, max_bytes=_LISTING_MAX_BYTES, follow=True)
    except (OSError, UntrustedJson) as e:
        reason = e.detail if isinstance(e, UntrustedJson) else e
        raise BadFile(str(path), f"is not a readable JSON listing ({reason})",
                      advice="remove it (sync writes it anew) or repair it") from None
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise BadFile(str(path), "is not a JSON array of release objects", json_path="$",
                      advice="remove it (sync writes it anew) or repair it")
    return doc


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"), temp=_temp_for(path))


def _temp_for(target: Path) -> str:
    """The temp file a sync writes ``target`` through: named for this process, so that a sync killed
    mid-write leaves a name the next one recognises as a dead writer's (``_clean_leftovers``)."""
    return f".{target.name}.sync-{os.getpid()}-{os.urandom(6).hex()}.tmp"


def _clean_leftovers(folders: Iterable[Path]) -> list[str]:
    """The temp files a killed sync left in ``folders`` (its pid is gone) removed; answers their paths."""
    removed: list[str] = []
    for folder in sorted(set(folders)):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            m = _LEFTOVER.fullmatch(name)
            if m is None or writer_alive(int(m.group("pid"))):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
                removed.append(str(folder / name))
    return removed


def _version_of(tag: str) -> str:
    return tag[1:] if tag[:1] in ("v", "V") and tag[1:2].isdigit() else tag


def listing(lock: Lock, repo: str, existing: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """``releases.json`` of ``repo`` in a mirror of ``lock``: the releases of ``existing`` with the
    lock's files added (by name; the lock's digest and size win), newest release first."""
    releases: dict[str, dict[str, Any]] = {}
    for r in existing:
        tag = r.get("tag_name")
        if isinstance(tag, str):
            releases.setdefault(tag, dict(r))
    for file_repo, tag, f in files_of(lock):
        if file_repo != repo:
            continue
        rel = releases.setdefault(tag, {"tag_name": tag, "name": tag, "draft": False, "prerelease": False,
                                        "assets": []})
        assets = [a for a in rel.get("assets") or [] if not (isinstance(a, dict) and a.get("name") == f.name)]
        assets.append({"name": f.name, "size": f.size, "digest": f"sha256:{f.sha256}"})
        rel["assets"] = sorted(assets, key=lambda a: str(a.get("name")) if isinstance(a, dict) else "")
    return [releases[t] for t in sorted(releases, key=lambda t: (version_key(_version_of(t)), t), reverse=True)]


def _bundle_fault(base: Path, f: LockedFile, built_by: Mapping[str, str | None], settings: Settings) -> str | None:
    """What is wrong with the Sigstore bundle beside asset ``f`` in the mirror at ``base``: not a regular
    file of it (a link, a FIFO: never followed or opened), or one that does not prove ``f``'s digest was
    built by ``built_by`` (under ``settings.sigstore_root``). None: there is none, or it proves it."""
    try:
        found = bundle_file(str(base / (f.path + SUFFIX))).found
        if found:
            proves(f.name, f.sha256, found[0], built_by, settings)
    except ProvenanceRefused as e:
        return e.fault
    except ValueError as e:  # an identity past the lock's schema
        return f"cannot be checked: the lock names no identity a bundle can prove ({e})"
    return None


def _bundle_problems(lock: Lock, base: Path, settings: Settings) -> tuple[int, list[Problem]]:
    """Each Sigstore bundle beside an asset of ``lock`` in the mirror, checked (``_bundle_fault``) against
    the identity the lock names for its engine (the recipe's for an older lock): how many prove their
    asset, and a problem for each that does not."""
    proven, problems, seen = 0, [], set()
    for f, built_by in provable(lock):
        if f.path in seen or not os.path.lexists(base / (f.path + SUFFIX)):
            continue
        seen.add(f.path)
        fault = _bundle_fault(base, f, built_by, settings)
        if fault is None:
            proven += 1
        else:
            problems.append(Problem(f.path + SUFFIX, fault))
    return proven, problems


def verify(lock: Lock, root: str | os.PathLike[str], settings: Settings) -> tuple[int, int, list[Problem]]:
    """Recheck every file ``lock`` names below ``root``, that each repository's listing states it with
    the lock's digest, and that each Sigstore bundle beside an asset proves it (``_bundle_problems``,
    under ``settings.sigstore_root``); changes nothing. Answers how many files hold the right bytes, how
    many bundles prove their asset, and each problem.

    Raises:
        LockFileError: a link in ``root`` leads out of it.
        BadFile: the trusted root named cannot be read.
    """

    base = Path(root)
    good = 0
    problems: list[Problem] = []
    for _, _, f in files_of(lock):
        target = _target(base, f.path)
        if not target.is_file():
            problems.append(Problem(f.path, "is missing"))
            continue
        got = sha256_file(target)
        if got != f.sha256:
            problems.append(Problem(f.path, f"has SHA-256 {got}, and the lock pins {f.sha256}"))
        elif target.stat().st_size != f.size:
            problems.append(Problem(f.path, f"has {target.stat().st_size} bytes, and the lock pins {f.size}"))
        else:
            good += 1
    for repo in sorted({repo for repo, _, _ in files_of(lock)}):
        where = _listing_path(base, repo)
        try:
            listed = _existing(base, repo)
        except BadFile as e:
            problems.append(Problem(str(where.relative_to(base)), e.fault))
            continue
        stated = {(r.get("tag_name"), a.get("name")): a.get("digest") for r in listed
                  for a in r.get("assets") or [] if isinstance(a, dict)}
        for file_repo, tag, f in files_of(lock):
            if file_repo == repo and stated.get((tag, f.name)) != f"sha256:{f.sha256}":
                fault = ("does not list it" if (tag, f.name) not in stated
                         else f"states {stated[(tag, f.name)]}, and the lock pins sha256:{f.sha256}")
                problems.append(Problem(f.path, f"{where.relative_to(base)} {fault}"))
    proven, unproven = _bundle_problems(lock, base, settings)
    return good, proven, problems + unproven
