"""``manifest/verdict``: the verdict on another release's compat document, in its order: who signed
the bytes as fetched (or that none did, refused when a signature is required), then the document,
then the tarball it names (a plain file name with a digest, checked when it is beside it).
(``superfluid compat --release`` end to end, with the real ``minisign``, is
``test_compat_release_verify.py``.)"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import BadSignatureFile, SecretKey, SignatureInvalid, UntrustedKey, generate, sign
from superfluid.manifest.verdict import (
    DocumentVerdict,
    TarballMismatch,
    Unsigned,
    judge_release,
    judge_signature,
    judge_tarball,
    tarball_name,
)
from superfluid.runtime.kernel.errors import BadFile

TARBALL = b"the release tarball\n"
SHA = hashlib.sha256(TARBALL).hexdigest()
WHERE, SIG_WHERE = "r/x.tar.gz.compat.json", "r/x.tar.gz.compat.json.minisig"


@pytest.fixture(scope="module")
def named_document(doc: dict[str, Any]) -> bytes:
    """This checkout's compat document naming ``x.tar.gz`` and its digest, as bytes."""
    named = {**doc, "release": {**doc["release"], "tarball": "x.tar.gz", "sha256": SHA}}
    return (json.dumps(named, indent=2) + "\n").encode()


def _signature(document: bytes, key: SecretKey, comment: str = "release x") -> bytes:
    return sign(document, key, trusted_comment=comment).to_text().encode()


def _trust(*keys: SecretKey) -> list[TrustedKey]:
    return [TrustedKey(k.public(), f"keys/{n}.pub") for n, k in enumerate(keys)]


# -- the signature ----------------------------------------------------------------------------------


def test_a_signature_by_a_trusted_key_names_the_key_and_its_file(named_document: bytes, key: SecretKey) -> None:
    other = generate()
    verdict = judge_signature(named_document, _signature(named_document, key), _trust(other, key), where=WHERE,
                              signature_where=SIG_WHERE, require=True)
    assert verdict == DocumentVerdict("verified", key.id, "keys/1.pub", "release x", "unnamed")
    assert verdict.text == f"verified by key {key.id}"


def test_unsigned_is_read_unless_a_signature_is_required(named_document: bytes, key: SecretKey) -> None:
    verdict = judge_signature(named_document, None, _trust(key), where=WHERE, signature_where=SIG_WHERE)
    assert verdict == DocumentVerdict("unsigned") and verdict.text == "unsigned"
    with pytest.raises(Unsigned) as refused:
        judge_signature(named_document, None, _trust(key), where=WHERE, signature_where=SIG_WHERE, require=True)
    assert str(refused.value).startswith(f"{WHERE} is unsigned (no {SIG_WHERE}), and --require-signature was given")
    assert refused.value.where == WHERE and "without --require-signature" in (refused.value.advice or "")


def _changed(document: bytes, key: SecretKey) -> tuple[bytes, bytes]:
    return document.replace(b'"abi": 1', b'"abi": 2', 1), _signature(document, key)


def _stranger(document: bytes, key: SecretKey) -> tuple[bytes, bytes]:
    return document, _signature(document, generate())


def _comment_changed(document: bytes, key: SecretKey) -> tuple[bytes, bytes]:
    lines = _signature(document, key).split(b"\n")
    lines[2] += b" (edited)"
    return document, b"\n".join(lines)


def _garbled(document: bytes, key: SecretKey) -> tuple[bytes, bytes]:
    return document, b"untrusted comment: x\nnot a signature\n"


@pytest.mark.parametrize(("attack", "error", "fragment"), [
    pytest.param(_changed, SignatureInvalid, f"{WHERE}: its signature does not verify with trusted key",
                 id="document-changed"),
    pytest.param(_comment_changed, SignatureInvalid, "the signature of its trusted comment does not verify",
                 id="trusted-comment-changed"),
    pytest.param(_stranger, UntrustedKey, "which is not a trusted key (trusted: ", id="key-nobody-trusts"),
    pytest.param(_garbled, BadSignatureFile, f"{SIG_WHERE}: is not a minisign signature", id="not-a-signature"),
])
def test_a_signature_that_does_not_hold_is_refused(named_document: bytes, key: SecretKey, attack: Any, error: type,
                                                   fragment: str) -> None:
    body, signature = attack(named_document, key)
    with pytest.raises(error) as refused:
        judge_signature(body, signature, _trust(key), where=WHERE, signature_where=SIG_WHERE)
    assert fragment in str(refused.value)


# -- the tarball ------------------------------------------------------------------------------------


def _release(name: Any = "x.tar.gz", sha: Any = SHA) -> dict[str, Any]:
    return {"release": {"tarball": name, "sha256": sha}}


@pytest.mark.parametrize(("doc", "name"), [
    pytest.param(_release(), "x.tar.gz", id="named-with-its-digest"),
    pytest.param({}, None, id="no-release"),
    pytest.param({"release": "x.tar.gz"}, None, id="release-not-an-object"),
    pytest.param(_release(name=None), None, id="no-tarball"),
    pytest.param(_release(sha=None), None, id="no-digest"),
    pytest.param(_release(sha=SHA.upper()), None, id="digest-not-lowercase"),
    pytest.param(_release(sha=f"sha256:{SHA}"), None, id="digest-with-a-prefix"),
    pytest.param(_release(sha=SHA[:-1]), None, id="digest-short"),
    pytest.param(_release(name="."), None, id="dot"),
    pytest.param(_release(name=".."), None, id="dot-dot"),
    pytest.param(_release(name="../x.tar.gz"), None, id="a-path-up"),
    pytest.param(_release(name="/etc/passwd"), None, id="absolute"),
    pytest.param(_release(name="sub\\x.tar.gz"), None, id="backslash"),
    pytest.param(_release(name="x\0.tar.gz"), None, id="nul"),
    pytest.param(_release(name=7), None, id="name-not-a-string"),
])
def test_the_tarball_a_document_names(doc: dict[str, Any], name: str | None) -> None:
    assert tarball_name(doc) == name


@pytest.mark.parametrize(("doc", "sha256", "tarball"), [
    pytest.param({}, SHA, "unnamed", id="none-named"),
    pytest.param(_release(), None, "absent", id="not-beside-it"),
    pytest.param(_release(), SHA, "checked", id="same-digest"),
    pytest.param(_release(), SHA.upper(), "checked", id="same-digest-in-capitals"),
])
def test_the_tarball_check(doc: dict[str, Any], sha256: str | None, tarball: str) -> None:
    verdict = judge_tarball(DocumentVerdict("unsigned"), doc, sha256, where=WHERE)
    assert verdict == DocumentVerdict("unsigned", tarball=tarball)  # type: ignore[arg-type]


def test_another_tarball_is_refused_with_both_digests() -> None:
    other = "0" * 64
    with pytest.raises(TarballMismatch) as refused:
        judge_tarball(DocumentVerdict("unsigned"), _release(), other.upper(), where=WHERE)
    assert str(refused.value).startswith(f"x.tar.gz beside {WHERE} has SHA-256 {other}, and the document says {SHA}")
    assert (refused.value.expected, refused.value.got) == (SHA, other)


# -- the whole check, in order ----------------------------------------------------------------------


def test_judge_release_checks_signature_document_then_tarball(named_document: bytes, key: SecretKey) -> None:
    asked: list[str] = []

    def beside(name: str) -> str | None:
        asked.append(name)
        return SHA

    doc, verdict = judge_release(named_document, _signature(named_document, key), _trust(key), where=WHERE,
                                 signature_where=SIG_WHERE, tarball_sha256=beside, require=True)
    assert doc == json.loads(named_document) and asked == ["x.tar.gz"]
    assert verdict.to_json() == {"verdict": f"verified by key {key.id}", "signature": "verified", "key_id": key.id,
                                 "key": "keys/0.pub", "trusted_comment": "release x", "tarball": "checked"}


def test_judge_release_asks_for_no_tarball_the_document_does_not_name(doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    _, verdict = judge_release(body, None, [], where=WHERE, signature_where=SIG_WHERE,
                               tarball_sha256=lambda name: pytest.fail(f"asked for {name}"))
    assert verdict.to_json()["verdict"] == "unsigned" and verdict.tarball == "unnamed"


def test_judge_release_refuses_the_signature_before_reading_the_document(key: SecretKey) -> None:
    garbage = b'{"schema": "superfluid-compat/1", "release": '
    with pytest.raises(UntrustedKey):
        judge_release(garbage, _signature(garbage, generate()), _trust(key), where=WHERE, signature_where=SIG_WHERE,
                      tarball_sha256=lambda name: None)
    with pytest.raises(BadFile, match="is not JSON"):
        judge_release(garbage, _signature(garbage, key), _trust(key), where=WHERE, signature_where=SIG_WHERE,
                      tarball_sha256=lambda name: None)


def test_judge_release_refuses_another_tarball(named_document: bytes) -> None:
    with pytest.raises(TarballMismatch):
        judge_release(named_document, None, [], where=WHERE, signature_where=SIG_WHERE,
                      tarball_sha256=lambda name: "f" * 64)
