"""A private Sigstore made in memory, for tests that verify bundles without the network (issue 46, item 6).

What GitHub Actions and the public Sigstore do when ``actions/attest-build-provenance`` runs, done here
with ``cryptography`` alone:

- a **CA** (a root and an intermediate, as Fulcio's) issues a short-lived leaf certificate for one
  workflow run, carrying GitHub's OIDC claims as Fulcio's extensions (OIDs ``1.3.6.1.4.1.57264.1.*``:
  issuer, build signer URI, runner, source repository URI, digest and ref, run invocation URI...) and
  the SAN ``https://github.com/OWNER/REPO/.github/workflows/FILE@REF``;
- a **CT log** key signs a precertificate SCT embedded in the leaf (sigstore-python requires one);
- a **transparency log** (Rekor v1-shaped) appends each entry's canonical body to an RFC 6962 Merkle
  tree and answers its inclusion proof, a checkpoint (a signed note) over the tree's root, and a signed
  entry timestamp over the entry with its integrated time;
- a **trusted root** (``application/vnd.dev.sigstore.trustedroot+json;version=0.1``) names the CA's
  chain, the log's key and the CT log's key, as sigstore-python's ``TrustedRoot`` reads it.

``sign`` makes a v0.3 bundle for some bytes: a DSSE envelope over an in-toto statement whose subject is
the bytes' sha256 (what ``actions/attest-build-provenance`` makes, SLSA provenance v1), or a message
signature over the bytes' digest (what ``sigstore sign`` makes). Its keywords make each hostile bundle
one argument: another identity, another subject, a time outside the certificate's validity, no inclusion
promise. A second ``SigstoreSimulator`` is a Sigstore the first one's root does not trust.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Claims", "SigstoreSimulator", "write_bundle", "GITHUB_ISSUER", "SLSA_V1", "IN_TOTO", "UTC"]

UTC = datetime.timezone.utc
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
SLSA_V1 = "https://slsa.dev/provenance/v1"
IN_TOTO = "application/vnd.in-toto+json"
_BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
_SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def _oid(n: int) -> x509.ObjectIdentifier:
    return x509.ObjectIdentifier(f"1.3.6.1.4.1.57264.1.{n}")


@dataclass(frozen=True)
class Claims:
    """One GitHub Actions run's OIDC claims, as Fulcio writes them into the certificate."""

    repository: str = "ggml-org/llama.cpp"
    workflow: str = ".github/workflows/release.yml"
    ref: str = "refs/tags/b6000"
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    run_id: int = 424242
    issuer: str = GITHUB_ISSUER
    #: the repository whose workflow signed (a reusable workflow of another repository), else ``repository``
    signer_repository: str | None = None

    def but(self, **changes: Any) -> Claims:
        """These claims with some changed (``claims.but(ref="refs/heads/main")``)."""
        return replace(self, **changes)

    @property
    def signer_uri(self) -> str:
        """The build signer URI, which is also the SAN: ``https://github.com/O/R/.github/workflows/F@REF``."""
        return f"https://github.com/{self.signer_repository or self.repository}/{self.workflow}@{self.ref}"

    def extensions(self) -> list[tuple[int, bytes]]:
        """Fulcio's extensions for these claims: (OID suffix, extnValue). 1.1-1.6 hold raw bytes (the
        deprecated encoding), 1.8 and later a DER UTF8String."""
        repo_uri = f"https://github.com/{self.repository}"
        run = f"{repo_uri}/actions/runs/{self.run_id}/attempts/1"
        raw = {1: self.issuer, 2: "push", 3: self.commit, 4: "release", 5: self.repository, 6: self.ref}
        der = {8: self.issuer, 9: self.signer_uri, 10: self.commit, 11: "github-hosted", 12: repo_uri,
               13: self.commit, 14: self.ref, 15: "123456", 16: f"https://github.com/{self.repository.split('/')[0]}",
               17: "654321", 18: self.signer_uri, 19: self.commit, 20: "push", 21: run, 22: "public"}
        return [(n, v.encode()) for n, v in raw.items()] + [(n, _utf8_string(v)) for n, v in der.items()]


def _utf8_string(value: str) -> bytes:
    """DER of a UTF8String."""
    data = value.encode()
    return b"\x0c" + _der_length(len(data)) + data


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _octet_string(data: bytes) -> bytes:
    return b"\x04" + _der_length(len(data)) + data


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _now() -> datetime.datetime:
    return datetime.datetime.now(UTC).replace(microsecond=0)


# RFC 6962, section 2.1: the Merkle tree of the log and the audit path of one leaf in it


def _leaf_hash(body: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + body).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n``."""
    k = 1
    while k << 1 < n:
        k <<= 1
    return k


def _root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node_hash(_root(leaves[:k]), _root(leaves[k:]))


def _path(m: int, leaves: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]), from the leaf's sibling up to the root's child."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if m < k:
        return _path(m, leaves[:k]) + [_root(leaves[k:])]
    return _path(m - k, leaves[k:]) + [_root(leaves[:k])]


class SigstoreSimulator:
    """A CA, a CT log and a transparency log of one private Sigstore, with its trusted root.

    ``origin`` names the log in its checkpoints; ``filler`` entries are in the log before the first
    bundle, so that every inclusion proof has hashes in it.
    """

    def __init__(self, *, name: str = "test", filler: int = 5) -> None:
        now = _now()
        self.name = name
        self.start = now - datetime.timedelta(days=365)
        self.root_key = ec.generate_private_key(ec.SECP384R1())
        self.root_cert = self._ca(f"{name}-sigstore", self.root_key, self.root_key, None, path_length=1)
        self.intermediate_key = ec.generate_private_key(ec.SECP384R1())
        self.intermediate_cert = self._ca(f"{name}-sigstore-intermediate", self.intermediate_key, self.root_key,
                                          self.root_cert, path_length=0)
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.rekor_key = ec.generate_private_key(ec.SECP256R1())
        self.rekor_log_id = hashlib.sha256(_spki(self.rekor_key.public_key())).digest()
        self.ct_log_id = hashlib.sha256(_spki(self.ct_key.public_key())).digest()
        self.origin = f"rekor.{name}.invalid - 1234567890"
        self.leaves: list[bytes] = [_leaf_hash(f"filler {i}".encode()) for i in range(filler)]

    # the CA

    def _ca(self, cn: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey,
            issuer: x509.Certificate | None, *, path_length: int) -> x509.Certificate:
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"{self.name}.invalid"),
                             x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        builder = (x509.CertificateBuilder()
                   .subject_name(subject)
                   .issuer_name(issuer.subject if issuer else subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(self.start)
                   .not_valid_after(self.start + datetime.timedelta(days=3650))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False, key_agreement=False,
                                                key_cert_sign=True, crl_sign=True, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
        if issuer is not None:
            builder = builder.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
        return builder.sign(signer, hashes.SHA384())

    def certificate(self, claims: Claims, key: ec.EllipticCurvePrivateKey, *, not_before: datetime.datetime,
                    minutes: int = 10, sct: bool = True) -> x509.Certificate:
        """A Fulcio-shaped leaf for ``key`` and ``claims``, valid ``minutes`` from ``not_before``, with an
        embedded SCT of this Sigstore's CT log (``sct=False``: none)."""
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([]))
                   .issuer_name(self.intermediate_cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(not_before)
                   .not_valid_after(not_before + datetime.timedelta(minutes=minutes))
                   .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False, key_agreement=False,
                                                key_cert_sign=False, crl_sign=False, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       self.intermediate_key.public_key()), critical=False)
                   .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(claims.signer_uri)]),
                                  critical=True))
        for n, value in claims.extensions():
            builder = builder.add_extension(x509.UnrecognizedExtension(_oid(n), value), critical=False)
        if not sct:
            return builder.sign(self.intermediate_key, hashes.SHA384())
        # RFC 6962 3.2: the CT log signs the TBSCertificate without the SCT list (the precertificate's),
        # bound to the issuer's key; the SCT list is then the last extension of the certificate issued
        precert_tbs = builder.sign(self.intermediate_key, hashes.SHA384()).tbs_certificate_bytes
        listed = builder.add_extension(x509.UnrecognizedExtension(_SCT_LIST, _octet_string(self._sct(precert_tbs))),
                                       critical=False)
        cert = listed.sign(self.intermediate_key, hashes.SHA384())
        assert cert.tbs_precertificate_bytes == precert_tbs
        return cert

    def _sct(self, precert_tbs: bytes, when: datetime.datetime | None = None) -> bytes:
        """A SignedCertificateTimestampList holding one SCT (RFC 6962 3.2-3.3) over ``precert_tbs``."""
        millis = int((when or _now()).timestamp() * 1000)
        issuer_key_hash = hashlib.sha256(_spki(self.intermediate_key.public_key())).digest()
        entry = issuer_key_hash + len(precert_tbs).to_bytes(3, "big") + precert_tbs
        signed = struct.pack("!BBQH", 0, 0, millis, 1) + entry + struct.pack("!H", 0)
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (struct.pack("!B", 0) + self.ct_log_id + struct.pack("!QH", millis, 0)
               + struct.pack("!BBH", 4, 3, len(signature)) + signature)
        serialized = struct.pack("!H", len(sct)) + sct
        return struct.pack("!H", len(serialized)) + serialized

    # the transparency log

    def _log(self, body: bytes, integrated: int, *, promise: bool = True) -> dict[str, Any]:
        """Append ``body`` and answer its ``TransparencyLogEntry`` (protobuf JSON), with its inclusion
        proof against a signed checkpoint of the tree as it is now; ``promise``: with a signed entry
        timestamp (the only source of a trusted time for a v1 entry)."""
        index = len(self.leaves)
        self.leaves.append(_leaf_hash(body))
        size = len(self.leaves)
        root = _root(self.leaves)
        note = f"{self.origin}\n{size}\n{_b64(root)}\n"
        signature = self.rekor_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = note + f"\n\u2014 {self.origin.split(' ')[0]} {_b64(self.rekor_log_id[:4] + signature)}\n"
        entry: dict[str, Any] = {
            "logIndex": str(index),
            "logId": {"keyId": _b64(self.rekor_log_id)},
            "kindVersion": {"kind": json.loads(body)["kind"], "version": "0.0.1"},
            "integratedTime": str(integrated),
            "inclusionProof": {"logIndex": str(index), "rootHash": _b64(root), "treeSize": str(size),
                               "hashes": [_b64(h) for h in _path(index, self.leaves)],
                               "checkpoint": {"envelope": checkpoint}},
            "canonicalizedBody": _b64(body),
        }
        if promise:
            signed = json.dumps({"body": _b64(body), "integratedTime": integrated, "logID": self.rekor_log_id.hex(),
                                 "logIndex": index}, sort_keys=True, separators=(",", ":"))
            entry["inclusionPromise"] = {
                "signedEntryTimestamp": _b64(self.rekor_key.sign(signed.encode(), ec.ECDSA(hashes.SHA256())))}
        return entry

    # bundles

    def statement(self, subject_sha256: str, *, name: str = "asset", predicate_type: str = SLSA_V1,
                  claims: Claims | None = None) -> bytes:
        """An in-toto statement v1 whose subject is ``name`` with ``subject_sha256``, the predicate shaped
        as ``actions/attest-build-provenance`` writes it."""
        claims = claims or Claims()
        predicate = {"buildDefinition": {
            "buildType": "https://actions.github.io/buildtypes/workflow/v1",
            "externalParameters": {"workflow": {"ref": claims.ref, "repository": f"https://github.com/"
                                                f"{claims.repository}", "path": claims.workflow}},
            "resolvedDependencies": [{"uri": f"git+https://github.com/{claims.repository}@{claims.ref}",
                                      "digest": {"gitCommit": claims.commit}}]},
            "runDetails": {"builder": {"id": f"https://github.com/{claims.repository}/{claims.workflow}@{claims.ref}"},
                           "metadata": {"invocationId": f"https://github.com/{claims.repository}/actions/runs/"
                                                        f"{claims.run_id}/attempts/1"}}}
        doc = {"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": name, "digest": {"sha256":
               subject_sha256}}], "predicateType": predicate_type, "predicate": predicate}
        return json.dumps(doc, separators=(",", ":")).encode()

    def sign(self, data: bytes, claims: Claims | None = None, *, dsse: bool = True, statement: bytes | None = None,
             signed_at: datetime.datetime | None = None, integrated: datetime.datetime | None = None,
             minutes: int = 10, promise: bool = True, name: str = "asset") -> dict[str, Any]:
        """A v0.3 bundle for ``data`` as ``claims``' run signs it: a DSSE envelope over ``statement``
        (default: SLSA provenance v1 with ``data``'s sha256 as its subject), or (``dsse=False``) a
        message signature over ``data``'s sha256. ``signed_at``: when the certificate starts to be valid
        (default now); ``integrated``: the log's time (default ``signed_at``); ``promise=False``: no
        signed entry timestamp, so no trusted time."""
        claims = claims or Claims()
        key = ec.generate_private_key(ec.SECP256R1())
        signed_at = signed_at or _now() - datetime.timedelta(minutes=1)
        cert = self.certificate(claims, key, not_before=signed_at, minutes=minutes)
        pem = _b64(cert.public_bytes(serialization.Encoding.PEM))
        when = int((integrated or signed_at + datetime.timedelta(seconds=30)).timestamp())
        digest = hashlib.sha256(data).digest()
        bundle: dict[str, Any] = {"mediaType": _BUNDLE_V03,
                                  "verificationMaterial": {"certificate": {"rawBytes": _b64(cert.public_bytes(
                                      serialization.Encoding.DER))}}}
        if dsse:
            payload = statement if statement is not None else self.statement(digest.hex(), name=name, claims=claims)
            pae = b"DSSEv1 %d %s %d %s" % (len(IN_TOTO), IN_TOTO.encode(), len(payload), payload)
            signature = key.sign(pae, ec.ECDSA(hashes.SHA256()))
            body = {"apiVersion": "0.0.1", "kind": "dsse", "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(json.dumps({
                    "payload": _b64(payload), "payloadType": IN_TOTO,
                    "signatures": [{"sig": _b64(signature)}]}).encode()).hexdigest()},
                "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
                "signatures": [{"signature": _b64(signature), "verifier": pem}]}}
            bundle["dsseEnvelope"] = {"payload": _b64(payload), "payloadType": IN_TOTO,
                                      "signatures": [{"sig": _b64(signature)}]}
        else:
            signature = key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
            body = {"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                "signature": {"content": _b64(signature), "publicKey": {"content": pem}}}}
            bundle["messageSignature"] = {"messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
                                          "signature": _b64(signature)}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        bundle["verificationMaterial"]["tlogEntries"] = [self._log(canonical, when, promise=promise)]
        return bundle

    # the trusted root

    def trusted_root(self) -> dict[str, Any]:
        """This Sigstore's ``TrustedRoot`` document: the CA chain, the log's key, the CT log's key."""
        start = self.start.strftime("%Y-%m-%dT%H:%M:%SZ")

        def key(k: ec.EllipticCurvePrivateKey, log_id: bytes, url: str) -> dict[str, Any]:
            return {"baseUrl": url, "hashAlgorithm": "SHA2_256", "logId": {"keyId": _b64(log_id)},
                    "publicKey": {"rawBytes": _b64(_spki(k.public_key())), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                  "validFor": {"start": start}}}

        chain = [{"rawBytes": _b64(c.public_bytes(serialization.Encoding.DER))}
                 for c in (self.intermediate_cert, self.root_cert)]
        return {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                "tlogs": [key(self.rekor_key, self.rekor_log_id, f"https://rekor.{self.name}.invalid")],
                "certificateAuthorities": [{"subject": {"organization": f"{self.name}.invalid",
                                                        "commonName": f"{self.name}-sigstore"},
                                            "uri": f"https://fulcio.{self.name}.invalid",
                                            "certChain": {"certificates": chain}, "validFor": {"start": start}}],
                "ctlogs": [key(self.ct_key, self.ct_log_id, f"https://ctfe.{self.name}.invalid")],
                "timestampAuthorities": []}

    def write_root(self, path: Path) -> Path:
        """The trusted root written to ``path``; ``path``."""
        path.write_text(json.dumps(self.trusted_root(), indent=2))
        return path


def write_bundle(path: Path, bundle: Mapping[str, Any]) -> Path:
    """``bundle`` written to ``path`` as JSON; ``path``."""
    path.write_text(json.dumps(bundle))
    return path

