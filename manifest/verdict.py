"""The verdict on another release's compat document: who signed it, and whether its tarball matches."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from superfluid.manifest.compat import parse
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SignatureError, parse_signature, verify
from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.planning import parse_sha256

__all__ = ["DocumentVerdict", "Unsigned", "TarballMismatch", "judge_signature", "tarball_name",
           "judge_tarball", "judge_release"]


TarballCheck = Literal["checked", "absent", "unnamed"]


class Unsigned(SignatureError):
    """No signature is beside the document, and one is required."""

    def __init__(self, where: str, signature_where: str) -> None:
        super().__init__(f"{where} is unsigned (no {signature_where}), and --require-signature was given",
                         advice="ask its publisher for the signature, or read it without --require-signature")
        self.where = where


class TarballMismatch(SuperfluidError):
    """The tarball beside the document is not the one the document names (another SHA-256)."""

    def __init__(self, where: str, tarball: str, expected: str, got: str) -> None:
        super().__init__(f"{tarball} beside {where} has SHA-256 {got}, and the document says {expected}",
                         advice="the tarball is not the one this document was made for; fetch both again")
        self.expected = expected
        self.got = got


@dataclass(frozen=True, slots=True)
class DocumentVerdict:
    """What was verified: the signature (and by which key) and the tarball's digest."""

    signature: Literal["verified", "unsigned"]
    key_id: str | None = None
    key_source: str | None = None  # the .pub file the key was read from
    trusted_comment: str | None = None
    tarball: TarballCheck = "unnamed"  # checked | absent (not beside the document) | unnamed (none named)

    @property
    def text(self) -> str:
        """``verified by key <ID>`` or ``unsigned``."""
        return f"verified by key {self.key_id}" if self.signature == "verified" else "unsigned"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.text, "signature": self.signature, "key_id": self.key_id, "key": self.key_source,
                "trusted_comment": self.trusted_comment, "tarball": self.tarball}


def judge_signature(document: bytes, signature: bytes | None, keys: Sequence[TrustedKey], *, where: str,
                    signature_where: str, require: bool = False) -> DocumentVerdict:
    """The signature verdict on ``document`` (its bytes as fetched from ``where``).

    Raises:
        Unsigned: ``signature`` is None and ``require``.
        BadSignatureFile: the signature is not in minisign's format.
        UntrustedKey: it names a key id no trusted key has.
        SignatureInvalid: it does not verify (the document or its trusted comment was changed).
    """
    if signature is None:
        if require:
            raise Unsigned(where, signature_where)
        return DocumentVerdict("unsigned")
    parsed = parse_signature(signature, signature_where)
    key = verify(document, parsed, [k.key for k in keys], where=where)
    source = next(k.source for k in keys if k.key == key)
    return DocumentVerdict("verified", key.id, source, parsed.trusted_comment)


def tarball_name(doc: Mapping[str, Any]) -> str | None:
    """The tarball file name the document's ``release`` names, when it names one with a digest and
    the name is a plain file name (never a path out of the document's directory)."""
    release = doc.get("release")
    if not isinstance(release, Mapping):
        return None
    name, sha = release.get("tarball"), release.get("sha256")
    if not isinstance(name, str) or not isinstance(sha, str) or parse_sha256(sha) != sha:
        return None
    if name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        return None
    return name


def judge_tarball(verdict: DocumentVerdict, doc: Mapping[str, Any], sha256: str | None, *,
                  where: str) -> DocumentVerdict:
    """``verdict`` with the tarball's check: ``sha256`` is the digest of the file found beside the
    document under ``tarball_name(doc)``, or None when none was found.

    Raises:
        TarballMismatch: the digests differ.
    """
    name = tarball_name(doc)
    if name is None:
        return replace(verdict, tarball="unnamed")
    if sha256 is None:
        return replace(verdict, tarball="absent")
    expected = str(doc["release"]["sha256"])
    if sha256.lower() != expected:
        raise TarballMismatch(where, name, expected, sha256.lower())
    return replace(verdict, tarball="checked")


def judge_release(document: bytes, signature: bytes | None, keys: Sequence[TrustedKey], *, where: str,
                  signature_where: str, tarball_sha256: Callable[[str], str | None],
                  require: bool = False) -> tuple[dict[str, Any], DocumentVerdict]:
    """The whole check of a release's compat document, in order: the signature over the bytes as
    fetched (``judge_signature``), then the document parsed and validated, then the tarball it
    names (``tarball_sha256(name)``: the SHA-256 of that file beside the document, or None when it
    is not there). ``superfluid compat --release`` and the manifest service both read releases
    through this; each fetches the bytes its own way.

    Raises:
        as ``judge_signature``; BadFile: not JSON, a schema major we do not know, not a compat
        document; TarballMismatch: the tarball has another SHA-256; and whatever ``tarball_sha256``
        raises.
    """
    verdict = judge_signature(document, signature, keys, where=where, signature_where=signature_where,
                              require=require)
    doc = parse(document, where)
    name = tarball_name(doc)
    digest = tarball_sha256(name) if name is not None else None
    return doc, judge_tarball(verdict, doc, digest, where=where)
