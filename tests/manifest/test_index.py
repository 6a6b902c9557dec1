"""The manifest service's index, in process (``manifest/index.py``): every kind of bad release folder
is one rejected release with its reason while the others still answer. (What ``choose`` answers is
``test_choose.py``; the service built on the index, ``test_service.py``.)"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.trust.identity import Identity
from superfluid.manifest.answers import render
from superfluid.manifest.choose import choose
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey, generate
from superfluid.manifest.routes import Choose, Page, ReleaseList, ReleaseOne
from superfluid.manifest.sources import DirectorySource
from superfluid.runtime.kernel.schema import errors
from tests.manifest.release_folders import vary, write_release

DOC = "superfluid_toolchain-{v}.tar.gz.compat.json"


def _index(root: Path, keys: list[TrustedKey]) -> Index:
    return build_index(DirectorySource(root).snapshot(), keys)


# -- bad input: each a rejected release with its reason; the good one still answers -----------------


def _garbage_json(folder: Path, key: SecretKey) -> None:
    from superfluid.manifest.minisign import sign

    doc = folder / DOC.format(v="0.9.0")
    doc.write_bytes(b'{"schema": "superfluid-compat/1", "release": ')  # signed garbage: the signature holds
    (folder / (doc.name + ".minisig")).write_text(sign(doc.read_bytes(), key, trusted_comment="t").to_text())


def _schema_invalid(folder: Path, key: SecretKey) -> None:
    from superfluid.manifest.minisign import sign

    doc = folder / DOC.format(v="0.9.0")
    body = json.loads(doc.read_text())
    del body["runtimes"]["basert"]["requires"]
    doc.write_text(json.dumps(body))
    (folder / (doc.name + ".minisig")).write_text(sign(doc.read_bytes(), key, trusted_comment="t").to_text())


def _unlink(name: str) -> Callable[[Path, SecretKey], None]:
    return lambda folder, key: (folder / name.format(v="0.9.0")).unlink()


def _write(name: str, data: bytes) -> Callable[[Path, SecretKey], None]:
    return lambda folder, key: (folder / name.format(v="0.9.0")).write_bytes(data)


def _signed(data: bytes) -> Callable[[Path, SecretKey], None]:
    """The document replaced by ``data``, signed: the signature holds, the content is at fault."""
    def attack(folder: Path, key: SecretKey) -> None:
        from superfluid.manifest.minisign import sign

        doc = folder / DOC.format(v="0.9.0")
        doc.write_bytes(data)
        (folder / (doc.name + ".minisig")).write_text(sign(data, key, trusted_comment="t").to_text())

    return attack


def _utf16(folder: Path, key: SecretKey) -> None:
    doc = folder / DOC.format(v="0.9.0")
    _signed(doc.read_text().encode("utf-16"))(folder, key)  # JSON all the same, but not the bytes a client reads


def _fifo(name: str) -> Callable[[Path, SecretKey], None]:
    def attack(folder: Path, key: SecretKey) -> None:
        path = folder / name.format(v="0.9.0")
        path.unlink()
        os.mkfifo(path)  # nothing ever writes to it: a reader that opens it blocking would hang

    return attack


def _no_compat(folder: Path, key: SecretKey) -> None:
    for path in folder.glob("*.compat.json*"):
        path.unlink()


def _tamper(folder: Path, key: SecretKey) -> None:
    doc = folder / DOC.format(v="0.9.0")
    doc.write_bytes(doc.read_bytes().replace(b'"abi": 1', b'"abi": 2', 1))


def _other_key(folder: Path, key: SecretKey) -> None:
    from superfluid.manifest.minisign import sign

    doc = folder / DOC.format(v="0.9.0")
    (folder / (doc.name + ".minisig")).write_text(sign(doc.read_bytes(), generate(), trusted_comment="t").to_text())


def _wheel_says_other_version(folder: Path, key: SecretKey) -> None:
    from superfluid.manifest.minisign import sign

    doc = folder / "superfluid_toolchain-0.9.0-py3-none-any.whl.compat.json"
    doc.write_bytes(doc.read_bytes().replace(b'"version": "0.9.0"', b'"version": "0.9.1"', 1))
    (folder / (doc.name + ".minisig")).write_text(sign(doc.read_bytes(), key, trusted_comment="t").to_text())


def _restated(name: str, attested_by: object) -> Callable[[Path, SecretKey], None]:
    """The document ``name`` stating ``attested_by`` as the workflow attesting the release (``...``: none),
    re-signed."""
    def attack(folder: Path, key: SecretKey) -> None:
        from superfluid.manifest.minisign import sign

        doc = folder / name.format(v="0.9.0")
        body = json.loads(doc.read_text())
        body["release"]["attested_by"] = attested_by
        if attested_by is ...:
            del body["release"]["attested_by"]
        doc.write_text(json.dumps(body))
        (folder / (doc.name + ".minisig")).write_text(sign(doc.read_bytes(), key, trusted_comment="t").to_text())

    return attack


WORKFLOW = Identity("acme/superfluid", ".github/workflows/release.yml", "refs/tags/v0.9.0")
WHEEL_DOC = "superfluid_toolchain-{v}-py3-none-any.whl.compat.json"

BAD = [
    pytest.param(_garbage_json, "is not JSON", id="garbage-json"),
    pytest.param(_schema_invalid, "does not match schema compat", id="schema-invalid"),
    pytest.param(_unlink(DOC + ".minisig"), "is unsigned (no ", id="missing-signature"),
    pytest.param(_write(DOC + ".minisig", b"untrusted comment: x\nnot a signature\n"), "is not a minisign signature",
                 id="signature-of-the-wrong-format"),
    pytest.param(_write(DOC + ".minisig", b"\xff\xfe\x00garbage"), "is not UTF-8 text", id="signature-binary"),
    pytest.param(_no_compat, "holds no <artifact>.compat.json", id="folder-without-compat-json"),
    pytest.param(_tamper, "does not verify with trusted key", id="tampered-after-signing"),
    pytest.param(_other_key, "which is not a trusted key", id="signed-by-a-stranger"),
    pytest.param(_write("superfluid_toolchain-{v}.tar.gz", b"another tarball"), "has SHA-256",
                 id="tarball-digest-wrong"),
    pytest.param(_signed(b"[" * 100_000), "is not JSON", id="deeply-nested"),
    pytest.param(_signed(b"[]"), "is not a compat document", id="not-an-object"),
    pytest.param(_signed(b'{"schema": "superfluid-compat/2", "release": {}, "runtimes": {}}'), "of schema",
                 id="unknown-schema-major"),
    pytest.param(_utf16, "is not UTF-8 text", id="utf-16"),
    pytest.param(_write(DOC, b" " * (4 << 20) + b"{}"), "is larger than", id="too-large"),
    pytest.param(_wheel_says_other_version, "state different versions", id="documents-disagree"),
    pytest.param(_fifo(DOC), "is a FIFO, not a regular file", id="compat-json-a-fifo"),
    pytest.param(_fifo(DOC + ".minisig"), "is a FIFO, not a regular file", id="signature-a-fifo"),
    pytest.param(_fifo("superfluid_toolchain-{v}.tar.gz"), "is not a regular file", id="tarball-a-fifo"),
    pytest.param(_restated(DOC, {"repository": "acme/superfluid", "workflow": ".github/workflows/../x.yml",
                                 "ref": "refs/tags/v0.9.0"}),
                 "states an attestation identity that is not one", id="attested-by-a-path-out"),
    pytest.param(_restated(DOC, {"repository": "acme", "workflow": ".github/workflows/release.yml", "ref": "v"}),
                 "does not match schema compat", id="attested-by-no-owner"),
    pytest.param(_restated(WHEEL_DOC, {**WORKFLOW.to_json(), "repository": "mallory/superfluid"}),
                 "state different workflows attesting them", id="documents-attested-by-two-workflows"),
    pytest.param(_restated(WHEEL_DOC, ...), "state different workflows attesting them",
                 id="one-document-attested-one-not"),
]


@pytest.mark.parametrize(("attack", "reason"), BAD)
def test_a_bad_release_folder_is_rejected_with_the_reason(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                          trusted: list[TrustedKey], attack: Any, reason: str) -> None:
    write_release(tmp_path, "good", vary(doc, "0.1.0"), key)
    attack(write_release(tmp_path, "bad", vary(doc, "0.9.0"), key, WORKFLOW), key)
    index = _index(tmp_path, trusted)
    assert [r.version for r in index.releases] == ["0.1.0"]
    [rejected] = index.rejected
    assert rejected.where == "bad" and reason in rejected.reason, rejected.reason
    assert index.release("0.9.0") is None
    assert render(index, ReleaseOne("0.9.0")).status == 404
    for q in (Choose("basert", "abi", "1"), Choose("basert", "abi", "2"), Choose("llamacpp", "build", "b11642")):
        answer = choose(index, q)
        assert "0.9.0" not in [r["version"] for r in answer["drives"] + answer["others"]]
        assert [r["where"] for r in answer["rejected"]] == ["bad"]


def test_without_keys_signatures_are_not_required_but_must_be_minisigns(tmp_path: Path, doc: dict[str, Any],
                                                                      key: SecretKey) -> None:
    write_release(tmp_path, "signed", vary(doc, "0.1.0"), key)
    write_release(tmp_path, "unsigned", vary(doc, "0.2.0"), None)
    bad = write_release(tmp_path, "garbled", vary(doc, "0.3.0"), key)
    (bad / (DOC.format(v="0.3.0") + ".minisig")).write_text("not minisign\n")
    index = _index(tmp_path, [])
    assert [(r.version, r.main.verdict.key_id) for r in index.releases] == [("0.2.0", None), ("0.1.0", None)]
    assert [(r.where, "is not a minisign signature" in r.reason) for r in index.rejected] == [("garbled", True)]
    one = index.release("0.1.0")
    assert one is not None and one.to_json()["signature"] is not None  # served, for a client to verify itself


def test_a_version_stated_by_two_folders_rejects_both(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                      trusted: list[TrustedKey]) -> None:
    write_release(tmp_path, "a", vary(doc, "0.1.0"), key)
    write_release(tmp_path, "b", vary(doc, "0.1.0"), key)
    write_release(tmp_path, "c", vary(doc, "0.2.0"), key)
    index = _index(tmp_path, trusted)
    assert [r.version for r in index.releases] == ["0.2.0"]
    assert [(r.where, r.version) for r in index.rejected] == [("a", "0.1.0"), ("b", "0.1.0")]
    assert "stated by 2 release folders (a, b)" in index.rejected[0].reason


def test_hidden_folders_and_loose_files_are_not_releases(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                         trusted: list[TrustedKey]) -> None:
    write_release(tmp_path, ".incoming", vary(doc, "0.5.0"), key)
    (tmp_path / "README").write_text("releases\n")
    write_release(tmp_path, "r", vary(doc, "0.1.0"), key)
    index = _index(tmp_path, trusted)
    assert [r.version for r in index.releases] == ["0.1.0"] and index.rejected == ()


def test_the_release_answer_carries_the_exact_bytes_a_client_verifies(tmp_path: Path, doc: dict[str, Any],
                                                                      key: SecretKey,
                                                                      trusted: list[TrustedKey]) -> None:
    from superfluid.manifest.minisign import parse_signature, verify

    folder = write_release(tmp_path, "r", vary(doc, "0.1.0"), key)
    answer = json.loads(render(_index(tmp_path, trusted), ReleaseOne("0.1.0")).data)
    assert errors(answer, "manifest-release") == []
    name = DOC.format(v="0.1.0")
    assert answer["document"].encode() == (folder / name).read_bytes()
    assert answer["signature"] == (folder / (name + ".minisig")).read_text()
    assert verify(answer["document"].encode(), parse_signature(answer["signature"], "x"), [key.public()], where="x")
    assert answer["verified"] == key.id and answer["tarball_check"] == "checked"
    assert answer["compat"] == json.loads(answer["document"])
    assert [a["document_name"] for a in answer["artifacts"]] == [name, "superfluid_toolchain-0.1.0-py3-none-any.whl"
                                                                       ".compat.json"]


def test_each_release_names_the_workflow_that_attests_it(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                         trusted: list[TrustedKey]) -> None:
    attested = Identity("acme/superfluid", ".github/workflows/release.yml", "refs/tags/v0.2.0")
    write_release(tmp_path, "r0.2.0", vary(doc, "0.2.0"), key, attested)
    write_release(tmp_path, "r0.1.0", vary(doc, "0.1.0"), key)  # packed before releases were attested
    index = _index(tmp_path, trusted)
    listing = json.loads(render(index, ReleaseList()).data)
    assert errors(listing, "manifest-releases") == []
    assert [(r["version"], r["attested_by"]) for r in listing["releases"]] == [("0.2.0", attested.to_json()),
                                                                                ("0.1.0", None)]
    one = json.loads(render(index, ReleaseOne("0.2.0")).data)
    assert errors(one, "manifest-release") == []
    assert one["attested_by"] == attested.to_json() == one["compat"]["release"]["attested_by"]
    assert [a["attested_by"] for a in one["artifacts"]] == [attested.to_json()] * 2
    assert json.loads(render(index, ReleaseOne("0.1.0")).data)["attested_by"] is None
    page = render(index, Page()).data.decode()
    assert "<th>attested by</th>" in page and f"<td>{attested}</td>" in page
