"""The static export as a TUF repository: metadata that refuses a frozen, rolled-back or mixed index.

See docs/manifest-service.md, "Freshness: the index as a TUF repository".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from superfluid.manifest.tuf_keys import ROLES, KeySet
from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.jsonread import read_bytes

if TYPE_CHECKING:
    from securesystemslib.signer import Signer
    from tuf.api.metadata import Metadata, Root

__all__ = ["Expiry", "expiry_of", "parse_expires", "MAX_VALIDITY", "METADATA",
           "latest_root", "sign_export", "refresh_timestamp", "rotate_root",
           "target_files", "now_utc"]

#: where the metadata sits in the tree
METADATA = "metadata"
_ROOT_FILE = re.compile(r"^([1-9][0-9]{0,9})\.root\.json$")
_DURATION = re.compile(r"^([0-9]+)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: the longest a role's metadata may be valid: 100 years (a date a signature can state, however long it is kept)
MAX_VALIDITY = timedelta(days=36500)
_MAX_METADATA = 8 << 20  # bytes of one metadata file read back


def _default(days: float) -> timedelta:
    return timedelta(days=days)


@dataclass(frozen=True, slots=True)
class Expiry:
    """How long each role's metadata is valid from when it is signed."""

    root: timedelta = field(default_factory=lambda: _default(365))
    targets: timedelta = field(default_factory=lambda: _default(90))
    snapshot: timedelta = field(default_factory=lambda: _default(90))
    timestamp: timedelta = field(default_factory=lambda: _default(1))

    def of(self, role: str) -> timedelta:
        value: timedelta = getattr(self, role)
        return value


def expiry_of(value: str) -> tuple[str, timedelta]:
    """One ``ROLE=DURATION`` (``2s``, ``30m``, ``12h``, ``7d``, ``4w``): the role and how long it is valid.

    Raises:
        ValueError: why it is refused, in words (an unknown role, a duration not so spelled, zero, or more
            than ``MAX_VALIDITY``).
    """
    role, sep, duration = value.partition("=")
    match = _DURATION.match(duration.strip())
    if not sep or role.strip() not in ROLES or match is None:
        raise ValueError(f"give ROLE=DURATION, ROLE one of {', '.join(ROLES)}, DURATION a whole number and a unit "
                         "(s, m, h, d, w), e.g. timestamp=2s")
    digits, unit = match[1].lstrip("0"), match[2]
    if not digits:
        raise ValueError(f"a duration of zero is not allowed: metadata valid for no time is expired when signed; "
                         f"give at least 1{unit}, e.g. {role.strip()}=1{unit}")
    if len(digits) > 12 or int(digits) * _UNITS[unit] > MAX_VALIDITY.total_seconds():
        raise ValueError(f"a duration of at most {MAX_VALIDITY.days}d (100 years) is allowed")
    return role.strip(), timedelta(seconds=int(digits) * _UNITS[unit])


def parse_expires(values: Sequence[str]) -> Expiry:
    """``--expires ROLE=DURATION`` (repeatable; ``2s``, ``30m``, ``12h``, ``7d``, ``4w``) over the defaults.

    Raises:
        UsageError: an unknown role, a duration not so spelled, zero or more than ``MAX_VALIDITY``.
    """
    expiry = Expiry()
    for value in values:
        try:
            role, valid = expiry_of(value)
        except ValueError as e:
            raise UsageError(f"--expires {value!r}: {e}") from None
        expiry = replace(expiry, **{role: valid})
    return expiry


def now_utc() -> datetime:
    """Now, to the second (what TUF's ``expires`` can state)."""
    return datetime.now(timezone.utc).replace(microsecond=0)


def _serialize(md: Metadata[Any]) -> bytes:
    from tuf.api.serialization.json import JSONSerializer

    return md.to_bytes(JSONSerializer(compact=False)) + b"\n"


def _read(path: Path) -> Metadata[Any]:
    from tuf.api.exceptions import RepositoryError
    from tuf.api.metadata import Metadata

    try:
        return Metadata.from_bytes(read_bytes(path, max_bytes=_MAX_METADATA))
    except OSError as e:
        raise BadFile(str(path), f"cannot be read ({e.strerror or e})") from None
    except RepositoryError as e:
        raise BadFile(str(path), f"is not TUF metadata ({e})") from None


def _roots(metadata: Path) -> dict[int, Path]:
    if not metadata.is_dir():
        return {}
    found = {}
    for p in metadata.iterdir():
        m = _ROOT_FILE.match(p.name)
        if m:
            found[int(m[1])] = p
    return found


def latest_root(metadata: Path) -> tuple[int, Metadata[Root]] | None:
    """The newest ``<N>.root.json`` in ``metadata`` (None: there is none).

    Raises:
        BadFile: it cannot be read or is not root metadata.
    """
    roots = _roots(metadata)
    if not roots:
        return None
    version = max(roots)
    md = _read(roots[version])
    if md.signed.type != "root" or md.signed.version != version:
        raise BadFile(str(roots[version]), f"is not root metadata of version {version}")
    return version, md


def _sign(md: Metadata[Any], signers: Sequence[Signer]) -> bytes:
    md.signatures.clear()
    for signer in signers:
        md.sign(signer, append=True)
    return _serialize(md)


def _new_root(keys: KeySet, version: int, expires: datetime) -> Metadata[Root]:
    from tuf.api.metadata import Metadata, Role, Root

    root = Root(version=version, expires=expires, consistent_snapshot=False,
                roles={role: Role([], keys.thresholds[role]) for role in ROLES})
    for role in ROLES:
        for key in keys.public[role]:
            root.add_key(key, role)
    return Metadata(root)


def _online(root: Root, keys: KeySet, role: str, why: str) -> list[Signer]:
    """The signers ``keys`` holds for ``role`` that ``root`` trusts, to its threshold."""
    delegated = root.roles[role]
    return keys.need(role, list(delegated.keyids), delegated.threshold, why=why)


def _meta(version: int, data: bytes) -> Any:
    from tuf.api.metadata import MetaFile

    return MetaFile.from_data(version, data, ["sha256"])


def _version(metadata: Path, role: str) -> int:
    path = metadata / f"{role}.json"
    return int(_read(path).signed.version) if path.is_file() else 0


def _chain(out: dict[str, bytes], root: Root, keys: KeySet, targets: Mapping[str, Any], versions: Mapping[str, int],
           expiry: Expiry, now: datetime, why: str) -> None:
    """targets.json, snapshot.json and timestamp.json, each one version past ``versions``."""
    from tuf.api.metadata import Metadata, Snapshot, Targets, Timestamp

    t = Metadata(Targets(version=versions["targets"] + 1, expires=now + expiry.targets, targets=dict(targets)))
    out["targets.json"] = _sign(t, _online(root, keys, "targets", why))
    s = Metadata(Snapshot(version=versions["snapshot"] + 1, expires=now + expiry.snapshot,
                          meta={"targets.json": _meta(t.signed.version, out["targets.json"])}))
    out["snapshot.json"] = _sign(s, _online(root, keys, "snapshot", why))
    ts = Metadata(Timestamp(version=versions["timestamp"] + 1, expires=now + expiry.timestamp,
                            snapshot_meta=_meta(s.signed.version, out["snapshot.json"])))
    out["timestamp.json"] = _sign(ts, _online(root, keys, "timestamp", why))


def target_files(tree: Path) -> dict[str, bytes]:
    """Every file of an export's tree but its metadata, by the path a client asks it at."""
    files = {}
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree).as_posix()
        if p.is_file() and not rel.startswith(f"{METADATA}/"):
            files[rel] = p.read_bytes()
    return files


def _write(metadata: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Each file atomically, the timestamp last: a client never sees a timestamp before what it names."""
    metadata.mkdir(parents=True, exist_ok=True)
    order = sorted(files, key=lambda n: (n == "timestamp.json", n == "snapshot.json", n))
    for name in order:
        write_atomic(metadata / name, files[name])
    return [Path(METADATA) / name for name in order]


def sign_export(stage: Path, previous: Path, keys: KeySet, expiry: Expiry, *, now: datetime | None = None
                ) -> list[Path]:
    """The metadata of the export staged in ``stage``, continuing the versions of ``previous`` (the
    earlier export it replaces, or a path that does not exist); the files written, relative.

    Raises:
        UsageError: the key set lacks a key the step needs, or is not the one the root trusts.
        BadFile: ``previous``'s metadata cannot be read.
    """
    from tuf.api.metadata import TargetFile

    now = now or now_utc()
    old = previous / METADATA
    out: dict[str, bytes] = {}
    found = latest_root(old)
    if found is None:
        root_md = _new_root(keys, 1, now + expiry.root)
        root_signers = keys.need("root", keys.keyids("root"), keys.thresholds["root"], why="sign the first root")
        out["1.root.json"] = _sign(root_md, root_signers)
    else:
        root_md = found[1]
        if root_md.signed.is_expired(now):
            raise UsageError(f"{old}/{found[0]}.root.json expired at {root_md.signed.expires:%Y-%m-%dT%H:%M:%SZ}: "
                             "every client refuses it",
                             fix=Fix(("superfluid-manifest", "rotate-root", "--tuf-keys", str(keys.where),
                                      str(previous)), "signs the next root, valid again"))
        for version, path in _roots(old).items():
            out[f"{version}.root.json"] = path.read_bytes()
    files = target_files(stage)
    targets = {path: TargetFile.from_data(path, data, ["sha256"]) for path, data in files.items()}
    versions = {role: _version(old, role) for role in ("targets", "snapshot", "timestamp")}
    _chain(out, root_md.signed, keys, targets, versions, expiry, now,
           why=f"sign the index (the keys root version {root_md.signed.version} trusts)")
    return _write(stage / METADATA, out)


def _repository(out: Path) -> tuple[Path, Metadata[Root]]:
    metadata = out / METADATA
    found = latest_root(metadata)
    if found is None or not (metadata / "timestamp.json").is_file():
        raise UsageError(f"{out} holds no TUF metadata ({METADATA}/1.root.json, timestamp.json)",
                         advice="export into it with --tuf-keys first")
    return metadata, found[1]


def refresh_timestamp(out: Path, keys: KeySet, expiry: Expiry, *, now: datetime | None = None) -> int:
    """Re-sign only ``out``'s timestamp (one version up, a new expiry, naming the snapshot there);
    answers its new version. What a cron job runs, with the timestamp key alone.

    Raises:
        UsageError: ``out`` holds no metadata, or ``keys`` lacks the timestamp key its root trusts.
        BadFile: the metadata cannot be read or written.
    """
    from tuf.api.metadata import Metadata, Timestamp

    now = now or now_utc()
    metadata, root_md = _repository(out)
    snapshot = (metadata / "snapshot.json").read_bytes()
    version = int(_read(metadata / "timestamp.json").signed.version) + 1
    ts = Metadata(Timestamp(version=version, expires=now + expiry.timestamp,
                            snapshot_meta=_meta(int(_read(metadata / "snapshot.json").signed.version), snapshot)))
    data = _sign(ts, _online(root_md.signed, keys, "timestamp", why="re-sign the timestamp"))
    try:
        _write(metadata, {"timestamp.json": data})
    except OSError as e:
        raise BadFile(str(metadata / "timestamp.json"), f"cannot be written ({e.strerror or e})") from None
    return version


def rotate_root(out: Path, old: KeySet, new: KeySet, expiry: Expiry, *, now: datetime | None = None) -> int:
    """Root version N+1 stating ``new``'s keys, signed by the threshold of root N's keys (from ``old``)
    and of its own; then targets, snapshot and timestamp re-signed with ``new``'s keys, one version
    up. Answers N+1. With ``old`` as ``new``, this renews the root's expiry.

    Raises:
        UsageError: ``old`` lacks root N's threshold, or ``new`` its own threshold or an online key.
        BadFile: the metadata cannot be read or written.
    """
    now = now or now_utc()
    metadata, current = _repository(out)
    version = current.signed.version + 1
    root_md = _new_root(new, version, now + expiry.root)
    was = current.signed.roles["root"]
    signers = old.need("root", list(was.keyids), was.threshold, why=f"sign root version {version} for root "
                       f"version {version - 1}")
    signers += [s for s in new.need("root", new.keyids("root"), new.thresholds["root"],
                                    why=f"sign root version {version} as itself")
                if s.public_key.keyid not in {x.public_key.keyid for x in signers}]
    files = {f"{version}.root.json": _sign(root_md, signers)}
    targets = _read(metadata / "targets.json").signed.targets
    versions = {role: _version(metadata, role) for role in ("targets", "snapshot", "timestamp")}
    _chain(files, root_md.signed, new, targets, versions, expiry, now, why=f"sign the index for root version {version}")
    try:
        _write(metadata, files)
    except OSError as e:
        raise BadFile(str(metadata), f"cannot be written ({e.strerror or e})") from None
    return version
