"""Provenance: which GitHub Actions workflow built a file, proven by its Sigstore bundle with sigstore-python, offline.

See docs/install.md, "Provenance".
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sigstore import __version__ as sigstore_version
from sigstore._internal.tuf import DEFAULT_TUF_URL
from sigstore._utils import read_embedded
from sigstore.errors import Error as SigstoreError
from sigstore.errors import VerificationError
from sigstore.hashes import Hashed
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier
from sigstore_models.common.v1 import HashAlgorithm
from sigstore_models.trustroot import v1 as trustroot_v1

from superfluid.installer.errors import ProvenanceRefused
from superfluid.installer.settings import SIGSTORE_ROOT_VARIABLE
from superfluid.installer.sources.bundles import BUNDLE_DEPTH, BUNDLE_MAX
from superfluid.installer.trust.identity import Identity, identity
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads, read_bytes

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

# A bundle is what actions/attest-build-provenance makes (a DSSE envelope over an in-toto statement, SLSA
# provenance v1, whose subject is the file's sha256) or what `sigstore sign` makes (a signature over the
# file's digest). sigstore-python's Verifier proves, in order: the certificate chains to a CA of the
# trusted root at a time the transparency log signed (its signed entry timestamp) and carries a CT log's
# SCT; the log entry is in the log (an inclusion proof against a signed checkpoint) and agrees with the
# bundle; the signature is the certificate key's over these bytes (or over a statement naming them). The
# policy here adds that the certificate's GitHub claims are the workflow asked (issuer, repository,
# workflow, ref). What was proven is a Provenance; any failure a ProvenanceRefused naming the step.
#
# sigstore (with pydantic and its protobuf models: about 150 ms) is imported at this module's top, and
# this module only by what verifies a bundle, so no other command pays for it. Nothing here opens a
# connection: the production root is the trusted_root.json sigstore-python carries, read from its package
# and never refreshed through TUF (Verifier.production() refreshes it online, or, offline, writes a cache
# under the user's home).

__all__ = ["ROOT_VARIABLE", "GITHUB_ISSUER", "SLSA_PROVENANCE_V1", "BUNDLE_MAX", "Identity", "Provenance", "Root",
           "ProvenanceRefused", "identity", "load_root", "read_bundle", "verify", "claims_of"]

#: the variable that names a trusted root, as ``--trust-root`` does (a private Sigstore, a test's)
ROOT_VARIABLE = SIGSTORE_ROOT_VARIABLE
#: the OIDC issuer of GitHub Actions' tokens, the only one whose certificates prove a workflow
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
#: the predicate ``actions/attest-build-provenance`` writes; a DSSE statement of another one is refused
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
_IN_TOTO = "application/vnd.in-toto+json"
_STATEMENT_V1 = "https://in-toto.io/Statement/v1"

_STATEMENT_MAX = 4 << 20  # bytes of a DSSE payload
_ROOT_MAX = 1 << 20  # bytes of a trusted root (the production one: 7 KiB)

# Fulcio's certificate extensions (github.com/sigstore/fulcio, docs/oid-info.md): 1.8 on are DER
# UTF8Strings; 1.1 is the issuer's older, raw encoding, kept by certificates issued before 1.8 existed
_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"
_CLAIMS = {"1.3.6.1.4.1.57264.1.8": "issuer", "1.3.6.1.4.1.57264.1.9": "signer",
           "1.3.6.1.4.1.57264.1.12": "repository_uri", "1.3.6.1.4.1.57264.1.13": "commit",
           "1.3.6.1.4.1.57264.1.14": "ref", "1.3.6.1.4.1.57264.1.21": "run_url"}

_GITHUB = "https://github.com/"

# sigstore-python's words at the start of its refusal -> the step that failed and what it means, in
# ours (its Verifier's steps 0-8, sigstore/verify/verifier.py; a bundle's own checks, sigstore/models.py)
_STEPS = (
    ("not enough sources of verified time", "time",
     "no trusted time: the bundle has no signed entry timestamp of the log nor a signed timestamp"),
    ("bundle must contain an inclusion promise", "time",
     "no trusted time: the bundle has no signed entry timestamp of the log nor a signed timestamp"),
    ("failed to build timestamp certificate chain", "certificate",
     "its certificate does not chain to a CA of the trusted root at the time the log signed (a certificate "
     "outside its validity then, or issued under another root)"),
    ("invalid signing cert", "certificate", "its certificate was not valid at the time the log signed"),
    ("failed to verify SCT", "certificate", "its certificate's SCT is not signed by a CT log of the trusted root"),
    ("invalid log entry", "log", "its transparency log entry does not verify (inclusion proof, checkpoint or "
                                 "signed entry timestamp) against a log of the trusted root"),
    ("transparency log entry is inconsistent", "log", "its transparency log entry is for other materials"),
    ("log entry", "log", "its transparency log entry is for other materials"),
    ("Signature is invalid for input", "bytes", "it signs other bytes than {subject}"),
    ("Bundle message digest mismatch", "bytes", "it signs other bytes than {subject}"),
    ("DSSE", "signature", "its DSSE envelope's signature does not verify"),
)

@dataclass(frozen=True, slots=True)
class Provenance:
    """What a verified bundle proved: the run that built the file and the log entry that recorded it."""

    repository: str  # OWNER/NAME of the source repository
    workflow: str  # the workflow file that signed, in the signer's repository
    ref: str  # the ref the run built (refs/tags/..., refs/heads/...)
    commit: str  # the source commit
    run_url: str  # the run's URL (GitHub's run invocation URI)
    signer: str  # the certificate's build signer URI (its SAN)
    issuer: str
    kind: str  # "dsse" (an in-toto statement) or "message-signature"
    predicate_type: str | None  # the statement's, for a DSSE bundle
    log_index: int
    integrated_time: str | None  # when the log recorded it (RFC 3339, UTC), where the entry says
    bundle_sha256: str

    def to_json(self) -> dict[str, Any]:
        """The ``provenance`` object of ``schemas/attestation-verify.schema.json``."""
        return {"repository": self.repository, "workflow": self.workflow, "ref": self.ref, "commit": self.commit,
                "run_url": self.run_url, "signer": self.signer, "issuer": self.issuer, "kind": self.kind,
                "predicate_type": self.predicate_type, "log_index": self.log_index,
                "integrated_time": self.integrated_time, "bundle_sha256": self.bundle_sha256}


@dataclass(frozen=True, slots=True)
class Root:
    """A trusted root and where it came from (a path, or the production root sigstore-python carries)."""

    trusted: TrustedRoot
    where: str


def load_root(path: str | None = None) -> Root:
    """The trusted root in the file at ``path`` (a ``TrustedRoot`` document), or the production root of
    the public Sigstore as the installed sigstore-python carries it: read from its package, offline.

    Raises:
        BadFile: the file cannot be read, is too large, or is not a trusted root with a CA and a log.
    """
    if path is None:
        data = read_embedded("trusted_root.json", DEFAULT_TUF_URL)
        where = f"the public Sigstore's root (as sigstore {sigstore_version} carries it)"
    else:
        try:
            data = read_bytes(path, max_bytes=_ROOT_MAX, follow=True)
            loads(data, max_bytes=_ROOT_MAX, max_depth=BUNDLE_DEPTH)
        except OSError as e:
            raise BadFile(path, f"cannot be read as a Sigstore trusted root ({e.strerror or e})") from None
        except UntrustedJson as e:
            raise BadFile(path, f"is not a Sigstore trusted root: it {e.fault}") from None
        where = path
    try:
        trusted = TrustedRoot(trustroot_v1.TrustedRoot.from_json(data))
        Verifier(trusted_root=trusted)  # a root with no log or no CA is refused here, not while verifying
        trusted.get_fulcio_certs()
    except (SigstoreError, ValueError) as e:
        raise BadFile(where, f"is not a Sigstore trusted root ({_first_line(e)})") from None
    return Root(trusted, where)


def read_bundle(path: str, *, follow: bool = True) -> bytes:
    """The bytes of the bundle at ``path``: a regular file (never a FIFO or a device; ``follow=False``:
    never a link, as in a mirror folder) of at most ``BUNDLE_MAX`` bytes.

    Raises:
        ProvenanceRefused: none of those (step ``bundle``).
    """
    try:
        return read_bytes(path, max_bytes=BUNDLE_MAX, follow=follow)
    except OSError as e:
        raise ProvenanceRefused(path, "bundle", f"cannot be read as a Sigstore bundle: it {e.strerror or e}") from None


def verify(sha256: str, bundle: bytes, wanted: Identity, root: Root, *, named: str,
           subject: str = "the file") -> Provenance:
    """Prove that ``bundle`` (its bytes; ``named`` so in messages) was signed for ``subject``, the file
    whose digest is ``sha256`` (64 hex digits), by the workflow ``wanted``, under ``root``; what it proved.

    Raises:
        ProvenanceRefused: the bundle is not JSON, too large or nested too deep (refused before it is
            parsed as a bundle), is no Sigstore bundle, or any check fails: the step is named.
        ValueError: ``sha256`` is not hex.
    """
    digest = Hashed(algorithm=HashAlgorithm.SHA2_256, digest=bytes.fromhex(sha256))
    doc = _parsed(bundle, named)
    policy = _Policy(wanted, named)
    try:
        parsed = Bundle.from_json(bundle)
        verifier = Verifier(trusted_root=root.trusted)
        if parsed._inner.dsse_envelope is not None:
            payload_type, payload = verifier.verify_dsse(parsed, policy)
            predicate: str | None = _statement_names(payload_type, payload, sha256, named, subject)
        else:
            verifier.verify_artifact(digest, parsed, policy)
            predicate = None
    except ProvenanceRefused:
        raise
    except (SigstoreError, ValueError) as e:  # its own refusals, and a field pydantic or cryptography refused
        raise _refusal(named, e, subject) from None
    return _proven(policy.claims, doc, bundle, predicate)


def _parsed(bundle: bytes, named: str) -> dict[str, Any]:
    """The bundle as JSON, read within its bounds before sigstore parses it."""
    try:
        doc = loads(bundle, max_bytes=BUNDLE_MAX, max_depth=BUNDLE_DEPTH)
    except UntrustedJson as e:
        raise ProvenanceRefused(named, "bundle", f"is not a Sigstore bundle: it {e.fault}") from None
    if not isinstance(doc, dict):
        raise ProvenanceRefused(named, "bundle", "is not a Sigstore bundle: not a JSON object")
    return doc


def _statement_names(payload_type: str, payload: bytes, sha256: str, named: str, subject: str) -> str:
    """The predicate type of a verified DSSE payload that is an in-toto statement of SLSA provenance v1
    naming ``sha256`` among its subjects.

    Raises:
        ProvenanceRefused: another payload type or predicate, or no subject with this digest.
    """
    if payload_type != _IN_TOTO:
        raise ProvenanceRefused(named, "statement", f"signs a {payload_type} payload, not an in-toto statement")
    try:
        statement = loads(payload, max_bytes=_STATEMENT_MAX)
    except UntrustedJson as e:
        raise ProvenanceRefused(named, "statement", f"signs a statement that {e.fault}") from None
    if not isinstance(statement, dict) or statement.get("_type") != _STATEMENT_V1:
        raise ProvenanceRefused(named, "statement", "signs something other than an in-toto statement v1")
    predicate = statement.get("predicateType")
    if predicate != SLSA_PROVENANCE_V1:
        raise ProvenanceRefused(named, "statement", f"states {predicate!r}, not SLSA build provenance "
                                                    f"({SLSA_PROVENANCE_V1})")
    subjects = statement.get("subject")
    digests = [str(s["digest"].get("sha256")) for s in subjects if isinstance(s, dict)
               and isinstance(s.get("digest"), dict)] if isinstance(subjects, list) else []
    if sha256 not in digests:
        listed = ", ".join(digests[:3]) or "none"
        raise ProvenanceRefused(named, "bytes", f"is for other bytes than {subject}: its statement names sha256 "
                                                f"{listed}, not {sha256}", wanted=sha256, found=listed)
    return SLSA_PROVENANCE_V1


def _refusal(named: str, e: Exception, subject: str) -> ProvenanceRefused:
    """sigstore-python's refusal in our words, its own after them."""
    words = _first_line(e)
    for start, step, fault in _STEPS:
        if words.startswith(start):
            return ProvenanceRefused(named, step, f"{fault.format(subject=subject)} ({words})")
    if isinstance(e, VerificationError):
        return ProvenanceRefused(named, "bundle", f"does not verify ({words})")
    return ProvenanceRefused(named, "bundle", f"is not a Sigstore bundle ({words})")


def _first_line(e: BaseException) -> str:
    """An exception's words, short: its first line, without the objects some append (a proof's repr)."""
    text = " ".join(str(a) for a in e.args).strip() or type(e).__name__
    words = text.splitlines()[0]
    for tail in (": expected ", " (encountered "):
        words = words.split(tail, 1)[0]
    return words if len(words) <= 200 else words[:197] + "..."


def _proven(claims: dict[str, str], doc: dict[str, Any], bundle: bytes, predicate: str | None) -> Provenance:
    """What the verified bundle proved (its claims were read by the policy, its log entry verified)."""
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    when = entry.get("integratedTime")
    stamp = (datetime.fromtimestamp(int(when), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
             if when not in (None, "", "0", 0) else None)
    signer = claims["signer"]
    return Provenance(repository=claims["repository_uri"].removeprefix(_GITHUB), workflow=_workflow_of(signer),
                      ref=claims.get("ref", ""), commit=claims.get("commit", ""), run_url=claims.get("run_url", ""),
                      signer=signer, issuer=claims["issuer"], kind="dsse" if predicate else "message-signature",
                      predicate_type=predicate, log_index=int(entry.get("logIndex", 0)), integrated_time=stamp,
                      bundle_sha256=hashlib.sha256(bundle).hexdigest())


def _workflow_of(signer: str) -> str:
    """``.github/workflows/release.yml`` of ``https://github.com/O/R/.github/workflows/release.yml@REF``."""
    path = signer.removeprefix(_GITHUB).rsplit("@", 1)[0]
    return "/".join(path.split("/")[2:])


def _utf8_string(der: bytes) -> str | None:
    """The text of a DER UTF8String (tag 12), or None for anything else."""
    if len(der) < 2 or der[0] != 0x0C:
        return None
    length, at = der[1], 2
    if length & 0x80:
        count = length & 0x7F
        if not 0 < count <= 4 or len(der) < 2 + count:
            return None
        length, at = int.from_bytes(der[2:2 + count], "big"), 2 + count
    if len(der) != at + length:
        return None
    try:
        return der[at:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def claims_of(cert: Certificate) -> dict[str, str]:
    """The GitHub claims Fulcio wrote into ``cert``: ``issuer``, ``signer`` (the build signer URI),
    ``repository_uri``, ``commit``, ``ref``, ``run_url``; the ones it lacks are absent."""
    claims: dict[str, str] = {}
    legacy: str | None = None
    for ext in cert.extensions:
        raw = getattr(ext.value, "value", None)
        if not isinstance(raw, bytes):
            continue
        dotted = ext.oid.dotted_string
        if dotted == _ISSUER_V1:
            legacy = raw.decode("utf-8", "replace")
        elif dotted in _CLAIMS and (text := _utf8_string(raw)) is not None:
            claims[_CLAIMS[dotted]] = text
    if "issuer" not in claims and legacy is not None:
        claims["issuer"] = legacy
    return claims


class _Policy:
    """sigstore's ``VerificationPolicy`` for ``wanted``: the certificate's GitHub claims must be that
    workflow's. It keeps the claims it read (``claims``) for the ``Provenance`` the caller answers."""

    def __init__(self, wanted: Identity, named: str) -> None:
        self.wanted = wanted
        self.named = named
        self.claims: dict[str, str] = {}

    def _refuse(self, fault: str, found: str) -> ProvenanceRefused:
        return ProvenanceRefused(self.named, "identity", fault, wanted=str(self.wanted), found=found)

    def verify(self, cert: Certificate) -> None:
        """Raises ``ProvenanceRefused`` (step ``identity``) when ``cert`` is not of the workflow wanted."""
        try:
            self.claims = claims = claims_of(cert)
        except ValueError as e:  # an extension cryptography cannot parse
            raise self._refuse(f"its certificate's extensions cannot be read ({e})", "") from None
        wanted = self.wanted
        issuer = claims.get("issuer", "no issuer")
        if issuer != GITHUB_ISSUER or "signer" not in claims or "repository_uri" not in claims:
            raise self._refuse(f"was signed by an identity of {issuer}, not by a GitHub Actions workflow "
                               f"(wanted {wanted})", issuer)
        repository = claims["repository_uri"].removeprefix(_GITHUB)
        signer = claims["signer"]
        if repository.casefold() != wanted.repository.casefold():
            raise self._refuse(f"was signed by a workflow of {repository}, not of {wanted.repository} "
                               f"(signer {signer})", repository)
        if not signer.casefold().startswith(f"{_GITHUB}{wanted.repository}/".casefold()):
            raise self._refuse(f"was signed by {signer}, a workflow of another repository than "
                               f"{wanted.repository}", signer)
        workflow = _workflow_of(signer)
        if wanted.workflow is not None and workflow != wanted.workflow:
            raise self._refuse(f"was signed by the workflow {workflow} of {repository}, not {wanted.workflow}",
                               workflow)
        ref = claims.get("ref", "")
        if wanted.ref is not None and not fnmatch.fnmatchcase(ref, wanted.ref):
            raise self._refuse(f"was built from {ref or 'no ref'}, not {wanted.ref} (signer {signer})", ref)
