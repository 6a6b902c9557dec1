"""``installer/trust/provenance``: a Sigstore bundle verified by sigstore-python against a trusted root,
offline, and what it proved (issue 46, items 1 and 6). Bundles come from ``SigstoreSimulator`` (a
private Sigstore made here) and, for the production root, from GitHub Actions itself
(``public_bundle``). Each attack is one row; the CLI's own table is tests/installer/trust/
test_attestation_verify.py."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.trust.provenance import (
    BUNDLE_MAX,
    GITHUB_ISSUER,
    Identity,
    ProvenanceRefused,
    Root,
    claims_of,
    identity,
    load_root,
    read_bundle,
    verify,
)
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.trust import public_bundle as public
from tests.installer.trust.sigstore_simulator import UTC, Claims, SigstoreSimulator

ASSET = b"an engine's archive\n" * 100
SHA = hashlib.sha256(ASSET).hexdigest()
WANTED = Identity("ggml-org/llama.cpp", ".github/workflows/release.yml", "refs/tags/*")


def _bytes(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle).encode()


def _check(bundle: dict[str, Any] | bytes, root: Root, wanted: Identity = WANTED, sha: str = SHA) -> Any:
    data = bundle if isinstance(bundle, bytes) else _bytes(bundle)
    return verify(sha, data, wanted, root, named="asset.sigstore.json", subject="asset.zip")


def test_an_attestation_proves_the_run_that_built_the_file(sigstore: SigstoreSimulator, sigstore_root: Root) -> None:
    bundle = sigstore.sign(ASSET, Claims(run_id=77))
    proven = _check(bundle, sigstore_root)
    entry = bundle["verificationMaterial"]["tlogEntries"][0]
    assert proven.to_json() == {
        "repository": "ggml-org/llama.cpp", "workflow": ".github/workflows/release.yml", "ref": "refs/tags/b6000",
        "commit": Claims().commit, "run_url": "https://github.com/ggml-org/llama.cpp/actions/runs/77/attempts/1",
        "signer": "https://github.com/ggml-org/llama.cpp/.github/workflows/release.yml@refs/tags/b6000",
        "issuer": GITHUB_ISSUER, "kind": "dsse", "predicate_type": "https://slsa.dev/provenance/v1",
        "log_index": int(entry["logIndex"]),
        "integrated_time": datetime.datetime.fromtimestamp(int(entry["integratedTime"]), UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"),
        "bundle_sha256": hashlib.sha256(_bytes(bundle)).hexdigest()}


def test_a_message_signature_proves_it_too(sigstore: SigstoreSimulator, sigstore_root: Root) -> None:
    proven = _check(sigstore.sign(ASSET, dsse=False), sigstore_root)
    assert (proven.kind, proven.predicate_type, proven.repository) == ("message-signature", None, "ggml-org/llama.cpp")


def test_the_identity_asked_may_leave_workflow_and_ref_open(sigstore: SigstoreSimulator, sigstore_root: Root) -> None:
    bundle = sigstore.sign(ASSET, Claims(ref="refs/heads/master"))
    proven = _check(bundle, sigstore_root, Identity("GGML-org/llama.cpp"))
    assert proven.ref == "refs/heads/master"  # GitHub's names are case-insensitive, the ref is whatever was built


def _tamper_proof(bundle: dict[str, Any]) -> None:
    proof = bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    first = base64.b64decode(proof["hashes"][0])
    proof["hashes"][0] = base64.b64encode(bytes([first[0] ^ 1]) + first[1:]).decode()


def _tamper_checkpoint(bundle: dict[str, Any]) -> None:
    checkpoint = bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]
    note, _, signature = checkpoint["envelope"].partition("\n\n")
    lines = note.split("\n")
    lines[1] = str(int(lines[1]) + 1)  # a tree size the log never signed
    checkpoint["envelope"] = "\n".join(lines) + "\n\n" + signature


def _tamper_promise(bundle: dict[str, Any]) -> None:
    entry = bundle["verificationMaterial"]["tlogEntries"][0]
    entry["integratedTime"] = str(int(entry["integratedTime"]) + 60)  # a time the log's promise does not sign


def _swap_envelope(bundle: dict[str, Any]) -> None:
    payload = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    payload["subject"][0]["digest"]["sha256"] = "0" * 64
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()


_NOW = datetime.datetime.now(UTC)

#: (bundle made as, tampered by, step, words of the refusal)
ATTACKS = [
    pytest.param({"claims": Claims(repository="evil/llama.cpp")}, None, "identity",
                 "was signed by a workflow of evil/llama.cpp, not of ggml-org/llama.cpp", id="another-repository"),
    pytest.param({"claims": Claims(workflow=".github/workflows/nightly.yml")}, None, "identity",
                 "the workflow .github/workflows/nightly.yml of ggml-org/llama.cpp, not .github/workflows/release.yml",
                 id="another-workflow"),
    pytest.param({"claims": Claims(ref="refs/heads/master")}, None, "identity",
                 "was built from refs/heads/master, not refs/tags/*", id="a-branch-where-tags-are-asked"),
    pytest.param({"claims": Claims(signer_repository="evil/actions")}, None, "identity",
                 "a workflow of another repository than ggml-org/llama.cpp", id="a-reusable-workflow-elsewhere"),
    pytest.param({"claims": Claims(issuer="https://accounts.google.com")}, None, "identity",
                 "signed by an identity of https://accounts.google.com, not by a GitHub Actions workflow",
                 id="not-github-actions"),
    pytest.param({"data": b"other bytes"}, None, "bytes", "is for other bytes than asset.zip", id="other-bytes-dsse"),
    pytest.param({"data": b"other bytes", "dsse": False}, None, "bytes", "it signs other bytes than asset.zip",
                 id="other-bytes-message-signature"),
    pytest.param({}, _swap_envelope, "signature", "DSSE envelope's signature does not verify",
                 id="a-statement-swapped-in"),
    pytest.param({}, _tamper_proof, "log", "transparency log entry does not verify", id="tampered-inclusion-proof"),
    pytest.param({}, _tamper_checkpoint, "log", "transparency log entry does not verify", id="tampered-checkpoint"),
    pytest.param({}, _tamper_promise, "log", "transparency log entry does not verify", id="tampered-log-time"),
    pytest.param({"signed_at": _NOW - datetime.timedelta(hours=2), "integrated": _NOW - datetime.timedelta(hours=1)},
                 None, "certificate", "does not chain to a CA of the trusted root at the time the log signed",
                 id="certificate-outside-its-validity"),
    pytest.param({"promise": False}, None, "time", "no trusted time", id="no-log-time"),
    pytest.param({"statement": b'{"_type": "https://in-toto.io/Statement/v1", "subject": [], '
                               b'"predicateType": "https://example.invalid/other/v1", "predicate": {}}'},
                 None, "statement", "not SLSA build provenance", id="another-predicate"),
]


@pytest.mark.parametrize(("made", "tamper", "step", "words"), ATTACKS)
def test_each_attack_is_refused_naming_its_step(sigstore: SigstoreSimulator, sigstore_root: Root, made: dict[str, Any],
                                                 tamper: Any, step: str, words: str) -> None:
    made = dict(made)
    bundle = sigstore.sign(made.pop("data", ASSET), **made)
    if tamper is not None:
        tamper(bundle)
    with pytest.raises(ProvenanceRefused) as refused:
        _check(bundle, sigstore_root)
    assert (refused.value.step, words in str(refused.value)) == (step, True), str(refused.value)
    assert str(refused.value).startswith("asset.sigstore.json: ")


def test_a_bundle_of_another_sigstore_is_refused(sigstore_root: Root) -> None:
    other = SigstoreSimulator(name="other")
    with pytest.raises(ProvenanceRefused, match="does not chain to a CA of the trusted root") as refused:
        _check(other.sign(ASSET), sigstore_root)
    assert refused.value.step == "certificate"


def test_the_identity_refused_is_named_both_ways(sigstore: SigstoreSimulator, sigstore_root: Root) -> None:
    with pytest.raises(ProvenanceRefused) as refused:
        _check(sigstore.sign(ASSET, Claims(repository="evil/llama.cpp")), sigstore_root)
    assert (refused.value.wanted, refused.value.found) == (str(WANTED), "evil/llama.cpp")
    assert str(WANTED) == "ggml-org/llama.cpp .github/workflows/release.yml at refs/tags/*"


@pytest.mark.parametrize(("data", "words"), [
    pytest.param(b"[" * 100 + b"]" * 100, "nested too deeply", id="deeply-nested"),
    pytest.param(b"{not json", "is not valid JSON", id="not-json"),
    pytest.param(b"[]", "not a JSON object", id="not-an-object"),
    pytest.param(b'{"mediaType": "application/vnd.dev.sigstore.bundle.v9+json"}', "is not a Sigstore bundle",
                 id="not-a-bundle"),
    pytest.param(b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "verificationMaterial": '
                 b'{"certificate": {"rawBytes": "AAAA"}, "tlogEntries": []}, "messageSignature": {"signature": ""}}',
                 "is not a Sigstore bundle", id="a-certificate-that-is-none"),
])
def test_what_is_not_a_bundle_is_refused_before_any_check(sigstore_root: Root, data: bytes, words: str) -> None:
    with pytest.raises(ProvenanceRefused, match=words) as refused:
        _check(data, sigstore_root)
    assert refused.value.step == "bundle"


def test_a_bundle_larger_than_the_cap_is_never_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.sigstore.json"
    with open(huge, "wb") as f:
        f.truncate(100 << 20)  # 100 MB, sparse: refused by its size before a byte is read
    with pytest.raises(ProvenanceRefused, match=f"is larger than {BUNDLE_MAX} bytes"):
        read_bundle(str(huge))


def test_a_fifo_or_a_link_out_of_a_folder_is_never_opened(tmp_path: Path, sigstore: SigstoreSimulator) -> None:
    fifo = tmp_path / "fifo.sigstore.json"
    os.mkfifo(fifo)
    with pytest.raises(ProvenanceRefused, match="is a FIFO, not a regular file"):
        read_bundle(str(fifo))  # never waits for a writer
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(sigstore.sign(ASSET)))
    link = tmp_path / "mirror" / "asset.zip.sigstore.json"
    link.parent.mkdir()
    link.symlink_to(outside)
    with pytest.raises(ProvenanceRefused, match="symbolic link"):
        read_bundle(str(link), follow=False)  # a mirror folder's bundle is its own file
    assert read_bundle(str(link)) == outside.read_bytes()  # a path the user named is followed


def test_the_production_root_is_read_from_the_package_offline(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """The public Sigstore's root as sigstore-python carries it: no connection, no TUF cache written
    (``Verifier.production()`` would refresh it online, or keep a copy under the user's home)."""
    found = public.public_bundle()  # from the native cache, or fetched with pip once (else skipped)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))

    def no_network(*args: object) -> None:
        raise AssertionError(f"a connection was opened: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    root = load_root()
    assert root.where.startswith("the public Sigstore's root") and list(tmp_path.iterdir()) == []
    proven = verify(hashlib.sha256(found.file.read_bytes()).hexdigest(), found.bundle.read_bytes(),
                    Identity(public.REPOSITORY, public.WORKFLOW, "refs/tags/v*"), root, named="bundle")
    assert (proven.repository, proven.workflow, proven.ref, proven.commit) == (
        public.REPOSITORY, public.WORKFLOW, public.REF, public.COMMIT)
    assert proven.integrated_time == "2024-12-04T23:13:46Z" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("content", "words"), [
    pytest.param("{}", "is not a Sigstore trusted root", id="empty"),
    pytest.param('{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1", "tlogs": [], '
                 '"certificateAuthorities": [], "ctlogs": []}', "is not a Sigstore trusted root", id="no-log"),
    pytest.param("[" * 100 + "]" * 100, "nested too deeply", id="nested"),
])
def test_a_trusted_root_that_is_none_is_refused(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "root.json"
    path.write_text(content)
    with pytest.raises(BadFile, match=words):
        load_root(str(path))


@pytest.mark.parametrize(("args", "expected"), [
    pytest.param(("a/b", "release.yml", None), Identity("a/b", ".github/workflows/release.yml"), id="bare-file"),
    pytest.param(("a/b", ".github/workflows/x.yaml", "refs/tags/*"), Identity("a/b", ".github/workflows/x.yaml",
                                                                             "refs/tags/*"), id="path-and-pattern"),
])
def test_the_identity_asked(args: tuple[str, str | None, str | None], expected: Identity) -> None:
    assert identity(*args) == expected


@pytest.mark.parametrize("args", [
    pytest.param(("nobody", None, None), id="no-owner"),
    pytest.param(("a/b/c", None, None), id="three-parts"),
    pytest.param(("a/b", "/etc/x.yml", None), id="absolute-workflow"),
    pytest.param(("a/b", "x.yml@refs/tags/v1", None), id="a-ref-in-the-workflow"),
    pytest.param(("a/b", "../x.yml", None), id="dot-dot"),
    pytest.param(("a/b", None, " "), id="empty-ref"),
])
def test_an_identity_of_another_shape_is_refused(args: tuple[str, str | None, str | None]) -> None:
    with pytest.raises(ValueError):
        identity(*args)


def test_the_claims_are_read_as_fulcio_writes_them(sigstore: SigstoreSimulator) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    cert = sigstore.certificate(Claims(), ec.generate_private_key(ec.SECP256R1()),
                           not_before=datetime.datetime.now(UTC))
    assert claims_of(cert) == {
        "issuer": GITHUB_ISSUER, "signer": Claims().signer_uri, "repository_uri": "https://github.com/ggml-org/llama.cpp",
        "commit": Claims().commit, "ref": "refs/tags/b6000",
        "run_url": "https://github.com/ggml-org/llama.cpp/actions/runs/424242/attempts/1"}
