"""The TUF key set of a manifest repository: one ed25519 key per file, made and read here.

See docs/manifest-service.md, "Key handling".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.jsonread import UntrustedJson, read_bytes, read_json
from superfluid.runtime.kernel.output import counted

if TYPE_CHECKING:
    from securesystemslib.signer import Key, Signer

__all__ = ["ROLES", "KEYS_FILE", "KeySet", "init_keys", "read_keys"]

#: the top-level TUF roles, in the order a client loads them
ROLES = ("root", "timestamp", "snapshot", "targets")
KEYS_FILE = "keys.json"
_KIND = "superfluid-tuf-keys"
_MAX_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class KeySet:
    """The keys of one repository: per role its threshold, its public keys and the signers present."""

    where: Path
    thresholds: dict[str, int]
    public: dict[str, list[Key]]
    signers: dict[str, list[Signer]]

    def keyids(self, role: str) -> list[str]:
        return [k.keyid for k in self.public[role]]

    def need(self, role: str, keyids: list[str], threshold: int, *, why: str) -> list[Signer]:
        """The signers here among ``keyids``, at least ``threshold`` of them.

        Raises:
            UsageError: fewer are here (names the files missing and why they are needed).
        """
        held = [s for s in self.signers[role] if s.public_key.keyid in keyids]
        if len(held) < threshold and self.signers[role] and not held:
            them = "key in {} is not the one" if len(self.signers[role]) == 1 else "keys in {} are not the ones"
            raise UsageError(f"the {role} {them.format(self.where)} needed to {why}",
                             advice="name the key set the root trusts with --tuf-keys, or make the root trust this "
                                    "one with rotate-root --to")
        if len(held) < threshold:
            raise UsageError(f"{self.where} holds {len(held)} of the {counted(threshold, role + ' key')} needed to "
                             f"{why}",
                             advice=f"bring the {role}-*.pem files back into {self.where} (a root key belongs "
                                    "offline between rotations), or name the key set that holds them")
        return held


def _write_private(path: Path, pem: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def init_keys(where: str | os.PathLike[str], *, root_keys: int = 1, root_threshold: int = 1) -> KeySet:
    """Make a key set in ``where`` (created; it must not hold one already).

    Raises:
        UsageError: a bad count or threshold, or ``where`` already holds a key set or is a file.
        BadFile: it cannot be written.
    """
    from securesystemslib.signer import CryptoSigner

    if root_keys < 1 or not 1 <= root_threshold <= root_keys:
        raise UsageError(f"--root-threshold {root_threshold} of --root-keys {root_keys}: the threshold must be "
                         "between 1 and the number of root keys")
    top = Path(where)
    if (top / KEYS_FILE).exists():
        raise UsageError(f"{top} already holds a key set ({KEYS_FILE}): a key set is never overwritten; name a "
                         "new directory")
    if top.exists() and not top.is_dir():
        raise UsageError(f"{top} is not a directory")
    counts = {"root": root_keys, "timestamp": 1, "snapshot": 1, "targets": 1}
    doc: dict[str, Any] = {"kind": _KIND, "roles": {}, "keys": {}, "files": {}}
    try:
        top.mkdir(parents=True, exist_ok=True, mode=0o700)
        for role in ROLES:
            ids = []
            for n in range(1, counts[role] + 1):
                signer = CryptoSigner.generate_ed25519()
                name = f"{role}-{n}.pem"
                _write_private(top / name, signer.private_bytes)
                key = signer.public_key
                ids.append(key.keyid)
                doc["keys"][key.keyid] = key.to_dict()
                doc["files"][key.keyid] = name
            doc["roles"][role] = {"threshold": root_threshold if role == "root" else 1, "keyids": ids}
        (top / KEYS_FILE).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except FileExistsError as e:
        raise UsageError(f"{e.filename} exists: a key set is never overwritten; name a new directory") from None
    except OSError as e:
        raise BadFile(str(e.filename or top), f"cannot be written ({e.strerror or e})") from None
    return read_keys(top)


def _load_signer(path: Path, key: Key) -> Signer:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    try:
        private = load_pem_private_key(read_bytes(path, max_bytes=64 << 10, follow=True), None)
        return CryptoSigner(private, key)  # type: ignore[arg-type]
    except OSError as e:
        raise BadFile(str(path), f"cannot be read ({e.strerror or e})") from None
    except (ValueError, TypeError) as e:  # not PEM, encrypted, another key than keys.json states
        raise BadFile(str(path), f"is not the private key {KEYS_FILE} names ({e})") from None


def read_keys(where: str | os.PathLike[str]) -> KeySet:
    """The key set in ``where``: every public key, and a signer for each private file present.

    Raises:
        UsageError: ``where`` holds no key set.
        BadFile: ``keys.json`` or a private key file is broken.
    """
    from securesystemslib.signer import Key

    top = Path(where)
    path = top / KEYS_FILE
    if not path.is_file():
        raise UsageError(f"--tuf-keys {top} holds no {KEYS_FILE}",
                         fix=Fix(("superfluid-manifest", "keys", "init", str(top)), "makes a key set there"))
    try:
        doc = read_json(path, max_bytes=_MAX_BYTES)
    except (OSError, UntrustedJson) as e:
        raise BadFile(str(path), f"cannot be read ({e})") from None
    try:
        if doc.get("kind") != _KIND:
            raise ValueError(f"kind is not {_KIND!r}")
        thresholds: dict[str, int] = {}
        public: dict[str, list[Key]] = {}
        signers: dict[str, list[Signer]] = {}
        for role in ROLES:
            entry = doc["roles"][role]
            thresholds[role] = int(entry["threshold"])
            public[role] = [Key.from_dict(kid, dict(doc["keys"][kid])) for kid in entry["keyids"]]
            signers[role] = [_load_signer(top / doc["files"][k.keyid], k) for k in public[role]
                             if (top / doc["files"][k.keyid]).is_file()]
            if not 1 <= thresholds[role] <= len(public[role]):
                raise ValueError(f"{role}'s threshold {thresholds[role]} is not between 1 and its key count")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadFile(str(path), f"is not a superfluid-manifest key set ({e})") from None
    return KeySet(top, thresholds, public, signers)
