"""minisign's files, signing and verification, in one place, in minisign's own formats."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from superfluid.runtime.kernel.errors import BadFile, SuperfluidError

__all__ = [
    "DEFAULT_UNTRUSTED_COMMENT",
    "PublicKey",
    "SecretKey",
    "Signature",
    "BadKey",
    "EncryptedKey",
    "BadSignatureFile",
    "SignatureError",
    "SignatureInvalid",
    "UntrustedKey",
    "key_id_text",
    "parse_public_key",
    "parse_secret_key",
    "parse_signature",
    "generate",
    "sign",
    "verify",
]

_UNTRUSTED = "untrusted comment: "
_TRUSTED = "trusted comment: "
_ED = b"Ed"  # the key algorithm, and the legacy signature of the file itself
_ED_HASHED = b"ED"  # a signature of the file's BLAKE2b-512
_KDF_NONE = b"\0\0"
_KDF_SCRYPT = b"Sc"
_CHK_B2 = b"B2"
_ID = 8  # bytes of a key id
_PK = 32  # bytes of an Ed25519 public key
_SIG = 64  # bytes of an Ed25519 signature
_PUBLIC_LEN = 2 + _ID + _PK
_SIGNATURE_LEN = 2 + _ID + _SIG
_SECRET_LEN = 2 + 2 + 2 + 32 + 8 + 8 + _ID + 64 + 32
_TRUSTED_MAX = 8192 - len(_TRUSTED) - 1  # minisign's TRUSTEDCOMMENTMAXBYTES, less prefix and newline
_COMMENT_MAX = 1024 - len(_UNTRUSTED) - 1  # minisign's COMMENTMAXBYTES, likewise

#: the untrusted comment ``minisign -S`` writes
DEFAULT_UNTRUSTED_COMMENT = "signature from minisign secret key"
#: the untrusted comment ``minisign -G`` writes on a secret key (with or without -W)
_SECRET_COMMENT = "minisign encrypted secret key"
_KEY_ADVICE = "make a key pair with minisign -G -W or ci/keygen DIR"


class BadKey(BadFile):
    """A public or secret key that is not minisign's (never quotes a secret key's content)."""

    def __init__(self, where: str, fault: str, *, advice: str | None = _KEY_ADVICE) -> None:
        super().__init__(where, fault, advice=advice)


class EncryptedKey(BadKey):
    """A secret key encrypted with a password (minisign's scrypt scheme, not read here)."""

    def __init__(self, where: str) -> None:
        super().__init__(where, "is encrypted with a password, which this signer does not read",
                         advice="remove the password with minisign -C -W -s FILE, or make an unencrypted pair "
                                "with minisign -G -W or ci/keygen DIR")


class BadSignatureFile(BadFile):
    """A ``.minisig`` that is not in minisign's signature format."""


class SignatureError(SuperfluidError):
    """A signature was read and is refused: it does not verify, or no trusted key made it."""


class SignatureInvalid(SignatureError):
    """The signature, or the signature of its trusted comment, does not verify with the key."""

    def __init__(self, where: str, key_id: str, what: str) -> None:
        super().__init__(f"{where}: {what} does not verify with trusted key {key_id}: the file was changed "
                         f"after it was signed, or the signature is not for it",
                         advice="do not use this file; fetch it again from its release")
        self.where = where
        self.key_id = key_id


class UntrustedKey(SignatureError):
    """The signature names a key id that no trusted key has."""

    def __init__(self, where: str, key_id: str, trusted: Sequence[str]) -> None:
        known = ", ".join(trusted) if trusted else "none"
        super().__init__(f"{where}: signed by key {key_id}, which is not a trusted key (trusted: {known})",
                         advice="if you trust that key, name its .pub file with --key FILE or put it in "
                                "$SUPERFLUID_HOME/keys/")
        self.where = where
        self.key_id = key_id


def key_id_text(key_id: bytes) -> str:
    """A key id as minisign prints it: little-endian, 16 upper-case hex digits.

    >>> key_id_text(bytes.fromhex("07bedb5e8f4a34b8"))
    'B8344A8F5EDBBE07'
    """
    return key_id[::-1].hex().upper()


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An Ed25519 public key and its minisign key id."""

    key_id: bytes
    key: bytes

    @property
    def id(self) -> str:
        return key_id_text(self.key_id)

    @property
    def base64(self) -> str:
        """The key as one base64 string (what ``minisign -P`` takes)."""
        return base64.b64encode(_ED + self.key_id + self.key).decode("ascii")

    def to_text(self) -> str:
        """The public key file, as ``minisign -G`` writes it (its comment prints the id as ``%llX``:
        no leading zeros, unlike ``id``)."""
        return f"{_UNTRUSTED}minisign public key {int.from_bytes(self.key_id, 'little'):X}\n{self.base64}\n"


@dataclass(frozen=True, slots=True)
class SecretKey:
    """An Ed25519 secret key (seed) with its public half and key id. Its repr shows the id only."""

    key_id: bytes
    seed: bytes = field(compare=False)
    public_key: bytes

    @property
    def id(self) -> str:
        return key_id_text(self.key_id)

    def public(self) -> PublicKey:
        return PublicKey(self.key_id, self.public_key)

    def to_text(self) -> str:
        """The unencrypted secret key file, as ``minisign -G -W`` writes it."""
        sk = self.seed + self.public_key
        body = (_ED + _KDF_NONE + _CHK_B2 + bytes(32 + 8 + 8) + self.key_id + sk
                + _checksum(self.key_id, sk))
        return f"{_UNTRUSTED}{_SECRET_COMMENT}\n{base64.b64encode(body).decode('ascii')}\n"

    def __repr__(self) -> str:
        return f"SecretKey(id={self.id!r})"


@dataclass(kw_only=True, frozen=True, slots=True)
class Signature:
    """A parsed ``.minisig``: the signature of a file and of its trusted comment."""

    algorithm: bytes  # b"ED" (of the file's BLAKE2b-512) or b"Ed" (legacy: of the file)
    key_id: bytes
    signature: bytes
    trusted_comment: str
    global_signature: bytes
    untrusted_comment: str = DEFAULT_UNTRUSTED_COMMENT

    @property
    def key_id_text(self) -> str:
        return key_id_text(self.key_id)

    @property
    def prehashed(self) -> bool:
        return self.algorithm == _ED_HASHED

    def to_text(self) -> str:
        """The ``.minisig`` file, as ``minisign -S`` writes it."""
        head = base64.b64encode(self.algorithm + self.key_id + self.signature).decode("ascii")
        tail = base64.b64encode(self.global_signature).decode("ascii")
        return f"{_UNTRUSTED}{self.untrusted_comment}\n{head}\n{_TRUSTED}{self.trusted_comment}\n{tail}\n"


def _checksum(key_id: bytes, sk: bytes) -> bytes:
    return hashlib.blake2b(_ED + key_id + sk, digest_size=32).digest()


def _b64(line: str, size: int) -> bytes | None:
    """``line`` decoded when it is strict base64 of exactly ``size`` bytes, else None."""
    try:
        raw = base64.b64decode(line.strip().encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return raw if len(raw) == size else None


def _text(data: str | bytes, where: str, error: type[BadFile]) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(where, "is not UTF-8 text") from None


def _key_line(text: str) -> str:
    """The base64 line of a key file: the one after the untrusted comment, or a lone line."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    if lines and lines[0].startswith(_UNTRUSTED):
        return lines[1] if len(lines) > 1 else ""
    return lines[0] if len([line for line in lines if line.strip()]) == 1 else ""


def parse_public_key(data: str | bytes, where: str) -> PublicKey:
    """A public key from its file (comment line and base64 line) or its lone base64 string.

    Raises:
        BadKey: not a minisign Ed25519 public key (names ``where`` and the fault).
    """
    raw = _b64(_key_line(_text(data, where, BadKey)), _PUBLIC_LEN)
    if raw is None:
        raise BadKey(where, f"is not a minisign public key (expected base64 of {_PUBLIC_LEN} bytes after an "
                            f"'{_UNTRUSTED.strip()}' line)")
    if raw[:2] != _ED:
        raise BadKey(where, f"is a public key for algorithm {raw[:2]!r}; minisign keys are Ed25519 ('Ed')")
    return PublicKey(raw[2:2 + _ID], raw[2 + _ID:])


def parse_secret_key(data: str | bytes, where: str) -> SecretKey:
    """An unencrypted secret key from its file (as ``minisign -G -W`` writes it).

    Messages never quote the content.

    Raises:
        EncryptedKey: the key is encrypted with a password.
        BadKey: not a minisign Ed25519 secret key, another kdf or checksum, or a checksum that does
            not match.
    """
    raw = _b64(_key_line(_text(data, where, BadKey)), _SECRET_LEN)
    if raw is None:
        raise BadKey(where, f"is not a minisign secret key (expected base64 of {_SECRET_LEN} bytes after an "
                            f"'{_UNTRUSTED.strip()}' line)")
    alg, kdf, chk_alg = raw[0:2], raw[2:4], raw[4:6]
    if alg != _ED:
        raise BadKey(where, "is a secret key for another algorithm than Ed25519 ('Ed')")
    if chk_alg != _CHK_B2:
        raise BadKey(where, "has a checksum of another kind than BLAKE2b ('B2')")
    if kdf == _KDF_SCRYPT:
        raise EncryptedKey(where)
    if kdf != _KDF_NONE:
        raise BadKey(where, "names a key derivation minisign does not define")
    key_id, sk, chk = raw[54:62], raw[62:126], raw[126:158]
    # minisign -G -W leaves the checksum zero (it is computed only when a password encrypts the
    # key); one that is there must match
    if chk != bytes(32) and not hmac.compare_digest(chk, _checksum(key_id, sk)):
        raise BadKey(where, "does not match its own checksum (damaged, or not minisign's)")
    return SecretKey(key_id, sk[:32], sk[32:])


def parse_signature(data: str | bytes, where: str) -> Signature:
    """A ``.minisig`` file, read as strictly as ``minisign -V`` reads it.

    Raises:
        BadSignatureFile: a line missing or malformed, an algorithm other than ``ED``/``Ed``, or a
            trusted comment with control characters.
    """
    lines = [line.removesuffix("\r") for line in _text(data, where, BadSignatureFile).split("\n")[:4]]
    if len(lines) < 4 or any("\r" in line for line in lines):
        raise BadSignatureFile(where, "is not a minisign signature (four lines expected)")
    untrusted, head, trusted, tail = lines
    if not untrusted.startswith(_UNTRUSTED):
        raise BadSignatureFile(where, f"is not a minisign signature (its first line must start with "
                                      f"'{_UNTRUSTED.strip()}')")
    raw = _b64(head, _SIGNATURE_LEN)
    if raw is None:
        raise BadSignatureFile(where, f"is not a minisign signature (line 2 must be base64 of {_SIGNATURE_LEN} bytes)")
    if raw[:2] not in (_ED, _ED_HASHED):
        raise BadSignatureFile(where, f"is a signature of algorithm {raw[:2]!r}; minisign's are 'ED' and 'Ed'")
    if not trusted.startswith(_TRUSTED):
        raise BadSignatureFile(where, f"is not a minisign signature (line 3 must start with '{_TRUSTED.strip()}')")
    comment = trusted[len(_TRUSTED):]
    if not _printable(comment):
        raise BadSignatureFile(where, "has a trusted comment with control characters")
    global_signature = _b64(tail, _SIG)
    if global_signature is None:
        raise BadSignatureFile(where, f"is not a minisign signature (line 4 must be base64 of {_SIG} bytes)")
    return Signature(algorithm=raw[:2], key_id=raw[2:2 + _ID], signature=raw[2 + _ID:], trusted_comment=comment,
                     global_signature=global_signature,
                     untrusted_comment=untrusted[len(_UNTRUSTED):])


def _printable(text: str) -> bool:
    """minisign's rule for a trusted comment: no control character but tab (C0, DEL, C1)."""
    return not any((ord(c) < 0x20 and c != "\t") or 0x7F <= ord(c) <= 0x9F for c in text)


def _one_line(text: str, what: str, limit: int) -> None:
    if "\n" in text or "\r" in text or not _printable(text):
        raise ValueError(f"a {what} must be one printable line, got {text!r}")
    if len(text.encode("utf-8")) > limit:
        raise ValueError(f"a {what} must be at most {limit} bytes")


def generate() -> SecretKey:
    """A new key pair with a random key id (as ``minisign -G`` makes one)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    raw = serialization.Encoding.Raw
    seed = private.private_bytes(raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    public = private.public_key().public_bytes(raw, serialization.PublicFormat.Raw)
    return SecretKey(os.urandom(_ID), seed, public)


def sign(message: bytes, key: SecretKey, *, trusted_comment: str,
         untrusted_comment: str = DEFAULT_UNTRUSTED_COMMENT, prehash: bool = True) -> Signature:
    """Sign ``message`` as ``minisign -S`` does (``prehash=False``: as ``minisign -S -l``).

    Raises:
        BadKey: the secret key's public half is not the public key of its seed.
        ValueError: a comment of more than one line, with control characters, or too long.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    _one_line(trusted_comment, "trusted comment", _TRUSTED_MAX)
    _one_line(untrusted_comment, "untrusted comment", _COMMENT_MAX)
    private = Ed25519PrivateKey.from_private_bytes(key.seed)
    derived = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    if not hmac.compare_digest(derived, key.public_key):
        raise BadKey(f"secret key {key.id}", "holds a public key that is not its own (damaged)")
    signed = hashlib.blake2b(message).digest() if prehash else message
    signature = private.sign(signed)
    global_signature = private.sign(signature + trusted_comment.encode("utf-8"))
    return Signature(algorithm=_ED_HASHED if prehash else _ED, key_id=key.key_id, signature=signature,
                     trusted_comment=trusted_comment, global_signature=global_signature,
                     untrusted_comment=untrusted_comment)


def verify(message: bytes, signature: Signature, trusted: Sequence[PublicKey], *, where: str) -> PublicKey:
    """The trusted key that made ``signature`` over ``message`` and its trusted comment.

    As ``minisign -V``: the key is chosen by the signature's key id, then the signature of the file
    (of its BLAKE2b-512 for ``ED``) and the signature of the trusted comment must both verify.

    Raises:
        UntrustedKey: no trusted key has the signature's key id.
        SignatureInvalid: the signature or the trusted comment's signature does not verify.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    candidates = [k for k in trusted if hmac.compare_digest(k.key_id, signature.key_id)]
    if not candidates:
        raise UntrustedKey(where, signature.key_id_text, sorted({k.id for k in trusted}))
    signed = hashlib.blake2b(message).digest() if signature.prehashed else message
    what = "its signature"
    for candidate in candidates:  # one, unless two trusted files share a key id
        public = Ed25519PublicKey.from_public_bytes(candidate.key)
        try:
            public.verify(signature.signature, signed)
        except InvalidSignature:
            continue
        try:
            public.verify(signature.global_signature, signature.signature + signature.trusted_comment.encode("utf-8"))
        except InvalidSignature:
            what = "the signature of its trusted comment"
            continue
        return candidate
    raise SignatureInvalid(where, signature.key_id_text, what)
