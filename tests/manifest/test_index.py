"""The manifest service's index and answers, in process (``manifest/index.py``, ``manifest/choose.py``):
every kind of bad release folder is one rejected release with its reason while the others still
answer; the ``choose`` answers are the installer's rules' answers (the ABI rule, the tested-build
list, version ordering), pinned to the same functions."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.answers import render
from superfluid.manifest.choose import choose, choose_routes
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey, generate
from superfluid.manifest.routes import Choose, ReleaseList, ReleaseOne
from superfluid.manifest.sources import DirectorySource
from superfluid.runtime.schema import errors
from tests.manifest.release_folders import base_document, vary, write_release

DOC = "superfluid_toolchain-{v}.tar.gz.compat.json"


@pytest.fixture(scope="module")
def trusted(key: SecretKey) -> list[TrustedKey]:
    return [TrustedKey(key.public(), "test.pub")]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return base_document()


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
]


@pytest.mark.parametrize(("attack", "reason"), BAD)
def test_a_bad_release_folder_is_rejected_with_the_reason(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                          trusted: list[TrustedKey], attack: Any, reason: str) -> None:
    write_release(tmp_path, "good", vary(doc, "0.1.0"), key)
    attack(write_release(tmp_path, "bad", vary(doc, "0.9.0"), key), key)
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


# -- choose: the installer's rules, newest first --------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], key: SecretKey,
          trusted: list[TrustedKey]) -> Index:
    """Four releases: 0.1.0 drives ABI 1 (unnumbered 0.3 line), 0.2.0 and 0.10.0 ABI 2 (no line),
    0.3.0 ABI 3; their llama.cpp builds differ; 0.10.0 ships no mlx."""
    root = tmp_path_factory.mktemp("fleet")
    write_release(root, "a", vary(doc, "0.1.0", builds=[("b11642", "v2"), ("b11284", "v1")]), key)
    write_release(root, "b", vary(doc, "0.2.0", abi=2, line=None, builds=[("b11669", "v2"), ("b11642", "v2")]), key)
    write_release(root, "c", vary(doc, "0.10.0", abi=2, line=None, builds=[("b11739", "v2")], drop=["mlx"]), key)
    write_release(root, "d", vary(doc, "0.3.0", abi=3, line=None, builds=[("b11739", "v2")], mlx=["0.33.0"]), key)
    return _index(root, trusted)


@pytest.mark.parametrize(("q", "drives", "by"), [
    pytest.param(Choose("basert", "abi", "1"), ["0.1.0"], "abi", id="abi-1"),
    pytest.param(Choose("basert", "abi", "2"), ["0.10.0", "0.2.0"], "abi", id="abi-2-newest-first"),
    pytest.param(Choose("basert", "abi", "7"), [], None, id="abi-nobody-drives"),
    pytest.param(Choose("basert", "version", "0.3.0"), ["0.1.0"], "line", id="unnumbered-of-the-line"),
    pytest.param(Choose("basert", "version", "0.03.9"), ["0.1.0"], "line", id="unnumbered-line-spelled-oddly"),
    pytest.param(Choose("basert", "version", "0.2.6"), [], None, id="unnumbered-off-the-line"),
    pytest.param(Choose("llamacpp", "build", "b11642"), ["0.2.0", "0.1.0"], "tested", id="build-tested-twice"),
    pytest.param(Choose("llamacpp", "build", "b11739"), ["0.10.0", "0.3.0"], "tested", id="build-newest-first"),
    pytest.param(Choose("llamacpp", "build", "b11549"), [], None, id="build-untested"),
    pytest.param(Choose("mlx", "version", "0.32.2"), ["0.2.0", "0.1.0"], "tested", id="mlx"),
    pytest.param(Choose("mlx", "version", "0.32.2", "macos-arm64"), ["0.2.0", "0.1.0"], "tested",
                 id="mlx-on-its-platform"),
    pytest.param(Choose("mlx", "version", "0.32.2", "linux-x64"), [], None, id="mlx-not-on-linux"),
])
def test_choose(fleet: Index, q: Choose, drives: list[str], by: str | None) -> None:
    answer = choose(fleet, q)
    assert errors(answer, "manifest-choose") == []
    assert [r["version"] for r in answer["drives"]] == drives
    assert all(r["by"] == by for r in answer["drives"])
    assert sorted(r["version"] for r in answer["drives"] + answer["others"]) == ["0.1.0", "0.10.0", "0.2.0", "0.3.0"]
    assert all(r["why"] and r["short"] for r in answer["drives"] + answer["others"])


@pytest.mark.parametrize(("q", "version", "why"), [
    (Choose("basert", "abi", "2"), "0.1.0", "a baseRT library states ABI 2; this superfluid drives ABI 1"),
    (Choose("basert", "abi", "2"), "0.2.0", "a baseRT library states ABI 2, the ABI this superfluid drives"),
    (Choose("basert", "version", "0.3.0"), "0.1.0",
     "baseRT 0.3.0 states no ABI number and is of the 0.3.x line, which carries ABI 1"),
    (Choose("basert", "version", "0.3.0"), "0.2.0", "baseRT 0.3.0 states no ABI number; this superfluid drives "
                                                   "ABI 2, and no unnumbered release carries ABI 2"),
    (Choose("llamacpp", "build", "b11549"), "0.1.0",
     "b11549 is not a build superfluid-toolchain 0.1.0 was tested against (tested: b11642, b11284); it installs only "
     "with --untested"),
    (Choose("mlx", "version", "0.32.2"), "0.10.0", "superfluid-toolchain 0.10.0 ships no mlx adapter"),
    (Choose("mlx", "version", "0.32.2", "linux-x64"), "0.1.0",
     "superfluid-toolchain 0.1.0 runs mlx on macos-arm64 only"),
])
def test_each_answer_says_why(fleet: Index, q: Choose, version: str, why: str) -> None:
    answer = choose(fleet, q)
    assert next(r for r in answer["drives"] + answer["others"] if r["version"] == version)["why"] == why


@pytest.mark.parametrize("abi", [1, 2, 3, 4])
@pytest.mark.parametrize("version", [None, "0.2.6", "0.3.0", "0.3.7", "0.4.0"])
def test_basert_answers_are_the_abi_rules(fleet: Index, abi: int, version: str | None) -> None:
    """Pinned to the function the loader and the planner call: the service holds no copy of it."""
    from superfluid.runtime.basert.abi import abi_verdict

    q = Choose("basert", "abi", str(abi)) if version is None else Choose("basert", "version", version)
    answer = choose(fleet, q)
    for row in answer["drives"] + answer["others"]:
        part = fleet.release(row["version"]).compat["runtimes"]["basert"]  # type: ignore[union-attr]
        rule = abi_verdict(version, None if version else abi, drives=part["requires"]["abi"],
                           line=part["unnumbered_line"])
        assert (row["by"], row["short"], row["why"]) == (rule.by, rule.short, rule.why)


def test_llamacpp_answers_are_the_installers_tested_builds(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                           trusted: list[TrustedKey]) -> None:
    """A release made from this checkout drives exactly the builds its llama.cpp adapter installs
    without --untested (the recipe's tested list, the installer's rule)."""
    from superfluid.runtime.llamacpp.recipe import tested

    write_release(tmp_path, "this", vary(doc, "0.1.0"), key)
    index = _index(tmp_path, trusted)
    installs = {b.version for b in tested()}
    for build in sorted(installs | {"b11284", "b11312", "b11434", "b11549", "b11642", "b11669", "b11739"}):
        driven = bool(choose(index, Choose("llamacpp", "build", build))["drives"])
        assert driven is (build in installs), build


def test_static_paths_cover_every_value_a_release_names(fleet: Index) -> None:
    paths = {q.path for q in choose_routes(fleet)}
    for expected in ("/v1/choose/basert/abi/1.json", "/v1/choose/basert/abi/3/linux-x64.json",
                     "/v1/choose/basert/version/0.3.0.json", "/v1/choose/llamacpp/build/b11669.json",
                     "/v1/choose/mlx/version/0.33.0/macos-arm64.json"):
        assert expected in paths
    assert "/v1/choose/basert/abi/7.json" not in paths


def test_releases_answer_matches_its_schema(fleet: Index) -> None:
    answer = json.loads(render(fleet, ReleaseList()).data)
    assert errors(answer, "manifest-releases") == []
    assert [r["version"] for r in answer["releases"]] == ["0.10.0", "0.3.0", "0.2.0", "0.1.0"]
    assert answer["signatures_required"] is True and len(answer["keys"]) == 1


# -- the WSGI application in process: reloading, a source gone, the environment ---------------------


def _call(app: Any, path: str, query: str = "", **headers: str) -> tuple[str, dict[str, str], bytes]:
    got: dict[str, Any] = {}

    def start_response(status: str, hdrs: list[tuple[str, str]]) -> None:
        got.update(status=status, headers={k.lower(): v for k, v in hdrs})

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               **{f"HTTP_{k.upper()}": v for k, v in headers.items()}}
    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body


def test_a_source_that_cannot_be_read_keeps_the_last_good_answers(tmp_path: Path, doc: dict[str, Any],
                                                                  key: SecretKey, trusted: list[TrustedKey]) -> None:
    from superfluid.manifest.service import Service, ServiceConfig

    root = tmp_path / "releases"
    write_release(root, "a", vary(doc, "0.1.0"), key)
    now = [0.0]
    service = Service(DirectorySource(root), trusted, ServiceConfig(ttl=10), clock=lambda: now[0])
    status, headers, body = _call(service, "/v1/choose/basert/abi/1")
    assert status == "200 OK" and [r["version"] for r in json.loads(body)["drives"]] == ["0.1.0"]
    write_release(root, "b", vary(doc, "0.2.0"), key)
    assert _call(service, "/v1/choose/basert/abi/1")[2] == body  # within the TTL: not looked at
    now[0] = 11
    again = _call(service, "/v1/choose/basert/abi/1")
    assert [r["version"] for r in json.loads(again[2])["drives"]] == ["0.2.0", "0.1.0"]
    assert again[1]["etag"] != headers["etag"]
    shutil.rmtree(root)
    now[0] = 22
    assert _call(service, "/v1/choose/basert/abi/1")[2] == again[2]  # the last good index still answers
    health = json.loads(_call(service, "/health")[2])
    assert health["status"] == "stale" and "cannot be listed" in health["error"]


def test_no_index_yet_answers_503(tmp_path: Path) -> None:
    from superfluid.manifest.service import Service

    gone = tmp_path / "gone"
    gone.mkdir()
    source = DirectorySource(gone)
    gone.rmdir()
    status, headers, body = _call(Service(source, []), "/v1/releases")
    assert status.startswith("503") and json.loads(body)["parameter"] == "source"
    assert _call(Service(source, []), "/health")[0].startswith("503")


@pytest.mark.parametrize(("variables", "fragment"), [
    ({}, "SUPERFLUID_MANIFEST_SOURCE is not set"),
    ({"SUPERFLUID_MANIFEST_SOURCE": "/nonexistent/releases"}, "no such directory"),
    ({"SUPERFLUID_MANIFEST_SOURCE": ".", "SUPERFLUID_MANIFEST_TTL": "soon"}, "not a number of seconds"),
])
def test_the_application_misconfigured_answers_503_with_the_reason(monkeypatch: pytest.MonkeyPatch,
                                                                   variables: dict[str, str], fragment: str) -> None:
    from superfluid.manifest import service

    for name in ("SUPERFLUID_MANIFEST_SOURCE", "SUPERFLUID_MANIFEST_KEYS", "SUPERFLUID_MANIFEST_TTL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    status, _, body = _call(service._FromEnvironment(), "/v1/releases")
    answer = json.loads(body)
    assert status.startswith("503") and answer["parameter"] == "configuration" and fragment in answer["error"]


def test_the_application_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, doc: dict[str, Any],
                                              key: SecretKey) -> None:
    from superfluid.manifest import service

    write_release(tmp_path / "r", "a", vary(doc, "0.1.0"), key)
    (tmp_path / "k.pub").write_text(key.public().to_text())
    monkeypatch.setenv("SUPERFLUID_MANIFEST_SOURCE", str(tmp_path / "r"))
    monkeypatch.setenv("SUPERFLUID_MANIFEST_KEYS", f"{tmp_path / 'nothing.pub'}:{tmp_path / 'k.pub'}")
    status, _, body = _call(service._FromEnvironment(), "/v1/releases")
    assert status.startswith("503") and "nothing.pub" in json.loads(body)["error"]  # a named key must read
    monkeypatch.setenv("SUPERFLUID_MANIFEST_KEYS", str(tmp_path / "k.pub"))
    monkeypatch.setenv("SUPERFLUID_MANIFEST_MAX_AGE", "5")
    app = service._FromEnvironment()
    status, headers, body = _call(app, "/v1/releases.json")
    assert status == "200 OK" and headers["cache-control"] == "public, max-age=5"
    assert json.loads(body)["keys"] == [key.id]
    assert _call(app, "/v1/releases.json", if_none_match=headers["etag"])[0] == "304 Not Modified"
