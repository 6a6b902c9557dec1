"""The manifest service's index: every release of a source, verified or rejected with the reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.installer.errors import DownloadError
from superfluid.installer.trust.identity import Identity
from superfluid.manifest.compat import attested_by
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import parse_signature
from superfluid.manifest.release_files import COMPAT_SUFFIX, SIGNATURE_SUFFIX
from superfluid.manifest.routes import ReleaseOne, version_usable
from superfluid.manifest.sources import Folder, Snapshot
from superfluid.manifest.verdict import DocumentVerdict, Unsigned, judge_release
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.ordering import version_key

__all__ = ["Document", "Good", "Rejected", "Index", "build_index", "MAX_DOCUMENT_BYTES", "MAX_SIGNATURE_BYTES"]

MAX_DOCUMENT_BYTES = 4 << 20  # bytes of one compat document (as superfluid compat --release reads)
MAX_SIGNATURE_BYTES = 16 << 10  # bytes of one .minisig (minisign's own line limits, with room)


@dataclass(frozen=True, slots=True)
class Document:
    """One verified compat document of a release folder, with its bytes and its signature's."""

    name: str  # <artifact>.compat.json
    text: str  # the bytes as read, as UTF-8 text (what the signature covers)
    signature: str | None  # the .minisig as read, or None when there is none
    compat: dict[str, Any]
    verdict: DocumentVerdict
    attested_by: Identity | None = None  # the workflow the document states attests the release's files

    @property
    def version(self) -> str:
        return str(self.compat["release"]["version"])

    def artifact_json(self) -> dict[str, Any]:
        release = self.compat["release"]
        return {"document_name": self.name, "tarball": release.get("tarball"), "sha256": release.get("sha256"),
                "tarball_check": self.verdict.tarball, "verified": self.verdict.key_id,
                "attested_by": self.attested_by.to_json() if self.attested_by is not None else None}


@dataclass(frozen=True, slots=True)
class Good:
    """A verified release: its documents, the first (the sdist's when there is one) answered as its own."""

    where: str
    documents: tuple[Document, ...]

    @property
    def main(self) -> Document:
        return self.documents[0]

    @property
    def version(self) -> str:
        return self.main.version

    @property
    def name(self) -> str:
        return str(self.main.compat["release"]["name"])

    @property
    def compat(self) -> dict[str, Any]:
        return self.main.compat

    def to_json(self) -> dict[str, Any]:
        """The answer of ``/v1/releases/<version>``."""
        main = self.main
        return {"version": self.version, "name": self.name, "path": ReleaseOne(self.version).path, "where": self.where,
                **main.artifact_json(), "trusted_comment": main.verdict.trusted_comment,
                "compat": main.compat, "document": main.text, "signature": main.signature,
                "artifacts": [d.artifact_json() for d in self.documents]}


@dataclass(frozen=True, slots=True)
class Rejected:
    """A release folder that is not answered, and why."""

    where: str
    version: str | None  # as the document states it, when it can be read at all (never trusted)
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "where": self.where, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Index:
    """Every release of one snapshot: verified ones newest first, and the rejected ones."""

    stamp: str
    releases: tuple[Good, ...]
    rejected: tuple[Rejected, ...]
    keys: tuple[str, ...]  # the trusted key ids; empty: signatures were not required

    def release(self, version: str) -> Good | None:
        return next((r for r in self.releases if r.version == version), None)

    def rejection(self, version: str) -> Rejected | None:
        return next((r for r in self.rejected if r.version == version), None)


def _stated_version(body: bytes | None) -> str | None:
    """The version a document states, for naming a rejected one (read from unverified bytes:
    a label, never a fact acted on)."""
    try:
        version = loads(body or b"", max_bytes=MAX_DOCUMENT_BYTES)["release"]["version"]
    except (UntrustedJson, TypeError, KeyError):
        return None
    return version if isinstance(version, str) and version_usable(version) else None


class _Refused(Exception):
    def __init__(self, reason: str, version: str | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.version = version


def _text(body: bytes, where: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadFile(where, "is not UTF-8 text") from None


def _check(folder: Folder, name: str, keys: Sequence[TrustedKey]) -> Document:
    """One compat document of ``folder``, verified.

    Raises:
        _Refused: why it is not.
        DownloadError: the source could not be reached.
    """
    where, signature_where = f"{folder.where}/{name}", f"{folder.where}/{name}{SIGNATURE_SUFFIX}"
    body: bytes | None = None
    try:
        body = folder.read(name, max_bytes=MAX_DOCUMENT_BYTES)
        if body is None:
            raise BadFile(where, "is no longer there")
        signature = folder.read(name + SIGNATURE_SUFFIX, max_bytes=MAX_SIGNATURE_BYTES)
        if not keys and signature is not None:
            parse_signature(signature, signature_where)  # no key to verify with, but it must be minisign's
        doc, verdict = judge_release(body, signature if keys else None, keys, where=where,
                                     signature_where=signature_where, tarball_sha256=folder.sha256,
                                     require=bool(keys))
        attested = attested_by(doc, where)
        text = _text(body, where)
        signature_text = _text(signature, signature_where) if signature is not None else None
    except DownloadError:
        raise
    except Unsigned:
        ids = ", ".join(k.key.id for k in keys)
        raise _Refused(f"{where} is unsigned (no {signature_where}), and this service trusts keys {ids}: every "
                       f"release must be signed", _stated_version(body)) from None
    except SuperfluidError as e:
        raise _Refused(str(e), _stated_version(body)) from None
    if keys and verdict.signature != "verified":  # judge_release refuses it; never answer it as good
        raise _Refused(f"{where} is unsigned", _stated_version(body))
    return Document(name, text, signature_text, doc, verdict, attested)


def _main_first(documents: list[Document]) -> list[Document]:
    """The sdist's document first (the release tarball), then the others by name."""
    return sorted(documents, key=lambda d: (not str(d.compat["release"].get("tarball") or "").endswith(".tar.gz"),
                                            d.name))


def _judge_folder(folder: Folder, keys: Sequence[TrustedKey]) -> Good | Rejected:
    names = sorted(n for n in folder.names if n.endswith(COMPAT_SUFFIX))
    if not names:
        return Rejected(folder.where, None, f"{folder.where} holds no <artifact>{COMPAT_SUFFIX}")
    documents = []
    for name in names:
        try:
            documents.append(_check(folder, name, keys))
        except _Refused as e:
            return Rejected(folder.where, e.version, e.reason)
    versions = sorted({d.version for d in documents})
    if len(versions) > 1:
        return Rejected(folder.where, None, f"{folder.where}: its compat documents state different versions "
                                            f"({', '.join(versions)})")
    if not version_usable(versions[0]):
        return Rejected(folder.where, None, f"{folder.where}: version {versions[0]!r} cannot name a path "
                                            f"(letters, digits and .+_!- only)")
    identities = {str(d.attested_by) if d.attested_by is not None else "none" for d in documents}
    if len(identities) > 1:  # one pack run writes them all: a release of two workflows is not one release
        return Rejected(folder.where, versions[0], f"{folder.where}: its compat documents state different "
                                                   f"workflows attesting them ({'; '.join(sorted(identities))})")
    return Good(folder.where, tuple(_main_first(documents)))


def build_index(snapshot: Snapshot, keys: Sequence[TrustedKey]) -> Index:
    """Judge every folder of ``snapshot``; a version stated by two verified folders rejects both.

    Raises:
        DownloadError: the source could not be reached (nothing of this snapshot is answered).
    """
    good: list[Good] = []
    rejected: list[Rejected] = []
    for folder in snapshot.folders:
        judged = _judge_folder(folder, keys)
        (good if isinstance(judged, Good) else rejected).append(judged)  # type: ignore[arg-type]
    by_version: dict[str, list[Good]] = {}
    for release in good:
        by_version.setdefault(release.version, []).append(release)
    for version, same in by_version.items():
        if len(same) > 1:
            places = ", ".join(r.where for r in same)
            rejected += [Rejected(r.where, version, f"version {version} is stated by {len(same)} release folders "
                                                    f"({places}): which one is the release is unclear") for r in same]
    good = [r for r in good if len(by_version[r.version]) == 1]
    good.sort(key=lambda r: r.where)
    good.sort(key=lambda r: version_key(r.version), reverse=True)
    rejected.sort(key=lambda r: r.where)
    return Index(snapshot.stamp, tuple(good), tuple(rejected), tuple(k.key.id for k in keys))
