"""``superfluid compat --release FILE|URL`` verifies the ``.minisig`` beside the document against the
trusted keys (the package's, ``$SUPERFLUID_HOME/keys``, ``--key``) and the tarball beside it, and
prints the verdict (SPEC §6.2, §8.3). Documents are signed by the real ``minisign -S``; URLs are
served by the loopback release server."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from superfluid.manifest.compat import with_tarball
from tests import cli
from tests.ci.conftest import KeyPair, make_key_pair, run_minisign
from tests.release_server import ReleaseServer

TARBALL = "superfluid_toolchain-9.9.tar.gz"
DOC = f"{TARBALL}.compat.json"


@dataclass(frozen=True)
class Signed:
    """A release folder: the tarball, its compat.json signed by ``keys`` (minisign -S), and a
    second key pair that signed nothing."""

    folder: Path
    keys: KeyPair
    stranger: KeyPair

    @property
    def doc(self) -> Path:
        return self.folder / DOC

    @property
    def sig(self) -> Path:
        return self.folder / f"{DOC}.minisig"


def _sf(env: dict[str, str], *args: str) -> cli.Run:
    return cli.run("superfluid", *args, env=env)


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("home")
    done = _sf({"PATH": "/usr/bin:/bin", "SUPERFLUID_HOME": str(home)}, "compat", "--json")
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "sfhome"
    home.mkdir()
    return {"PATH": "/usr/bin:/bin", "SUPERFLUID_HOME": str(home), "HOME": str(tmp_path)}


@pytest.fixture
def signed(tmp_path: Path, document: dict) -> Signed:
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / TARBALL).write_bytes(b"the release tarball\n")
    (folder / DOC).write_text(json.dumps(with_tarball(document, str(folder / TARBALL)), indent=2) + "\n")
    keys = make_key_pair(tmp_path / "keys")
    done = run_minisign("-S", "-s", str(keys.secret), "-m", str(folder / DOC), "-t", f"release 9.9\tfile:{DOC}")
    assert done.returncode == 0, done.stderr
    return Signed(folder, keys, make_key_pair(tmp_path / "stranger"))


def test_verified_by_a_key_named_with_key(env: dict[str, str], signed: Signed) -> None:
    done = _sf(env, "compat", "--release", str(signed.doc), "--key", str(signed.keys.public))
    assert done.code == 0 and done.stderr == "", done.stderr
    assert (f"signature: verified by key {signed.keys.key_id} ({signed.keys.public}); trusted comment: "
            f"release 9.9\tfile:{DOC}\ntarball: its SHA-256 checked\n") in done.stdout


def test_json_carries_the_verdict(env: dict[str, str], signed: Signed, document: dict) -> None:
    done = _sf(env, "compat", "--release", str(signed.doc), "--key", str(signed.keys.public), "--json")
    assert done.code == 0, done.stderr
    got = json.loads(done.stdout)
    assert got.pop("verification") == {
        "verdict": f"verified by key {signed.keys.key_id}", "signature": "verified", "key_id": signed.keys.key_id,
        "key": str(signed.keys.public), "trusted_comment": f"release 9.9\tfile:{DOC}", "tarball": "checked"}
    assert got["runtimes"] == document["runtimes"] and got["release"]["tarball"] == TARBALL


def test_keys_in_superfluid_home_are_trusted(env: dict[str, str], signed: Signed) -> None:
    keys = Path(env["SUPERFLUID_HOME"]) / "keys"
    keys.mkdir()
    shutil.copy(signed.stranger.public, keys / "a-stranger.pub")
    shutil.copy(signed.keys.public, keys / "release.pub")
    done = _sf(env, "compat", "--release", str(signed.doc))
    assert done.code == 0, done.stderr
    assert f"signature: verified by key {signed.keys.key_id} ({keys / 'release.pub'})" in done.stdout


def test_a_legacy_signature_is_accepted(env: dict[str, str], signed: Signed) -> None:
    done = run_minisign("-S", "-l", "-s", str(signed.keys.secret), "-m", str(signed.doc))
    assert done.returncode == 0, done.stderr
    got = _sf(env, "compat", "--release", str(signed.doc), "--key", str(signed.keys.public))
    assert got.code == 0 and f"verified by key {signed.keys.key_id}" in got.stdout


def test_unsigned_is_read_with_a_warning(env: dict[str, str], signed: Signed) -> None:
    signed.sig.unlink()
    done = _sf(env, "compat", "--release", str(signed.doc), "--json")
    assert done.code == 0
    assert json.loads(done.stdout)["verification"]["verdict"] == "unsigned"
    assert done.stderr == (f"superfluid: warning: {signed.doc} is unsigned (no .minisig beside it): its content is "
                           f"not verified; --require-signature refuses it\n")


def test_unsigned_is_refused_when_a_signature_is_required(env: dict[str, str], signed: Signed) -> None:
    signed.sig.unlink()
    done = _sf(env, "compat", "--release", str(signed.doc), "--require-signature")
    assert done.code == 1 and done.stdout == ""
    assert f"superfluid: {signed.doc} is unsigned (no {signed.sig}), and --require-signature was given" in done.stderr


def _change_doc(signed: Signed) -> None:
    body = signed.doc.read_bytes()
    signed.doc.write_bytes(body.replace(b'"abi": 1', b'"abi": 2', 1))


def _change_trusted_comment(signed: Signed) -> None:
    lines = signed.sig.read_text().split("\n")
    lines[2] += " (edited)"
    signed.sig.write_text("\n".join(lines))


def _sign_with_stranger(signed: Signed) -> None:
    done = run_minisign("-S", "-s", str(signed.stranger.secret), "-m", str(signed.doc))
    assert done.returncode == 0


def _garble_signature(signed: Signed) -> None:
    signed.sig.write_text("untrusted comment: x\nnot a signature\n")


def _change_tarball(signed: Signed) -> None:
    (signed.folder / TARBALL).write_bytes(b"another tarball\n")


@pytest.mark.parametrize(("attack", "fragment"), [
    pytest.param(_change_doc, "{doc}: its signature does not verify with trusted key {id}: the file was changed "
                              "after it was signed", id="document-changed"),
    pytest.param(_change_trusted_comment, "{doc}: the signature of its trusted comment does not verify",
                 id="trusted-comment-changed"),
    pytest.param(_sign_with_stranger, "{doc}: signed by key {stranger}, which is not a trusted key (trusted: {id})",
                 id="key-nobody-trusts"),
    pytest.param(_garble_signature, "{sig}: is not a minisign signature", id="not-a-signature"),
    pytest.param(_change_tarball, "{tarball} beside {doc} has SHA-256 ", id="tarball-changed"),
])
def test_refused_with_the_reason(env: dict[str, str], signed: Signed, attack, fragment: str) -> None:
    attack(signed)
    for extra in ((), ("--json",)):
        done = _sf(env, "compat", "--release", str(signed.doc), "--key", str(signed.keys.public), *extra)
        assert done.code == 1
        if extra:  # --json: the refusal as JSON on stdout too (issue 15), nothing of the document
            assert json.loads(done.stdout)["error"]["message"] == done.stderr.removeprefix("superfluid: ").rstrip("\n")
        else:
            assert done.stdout == ""
        want = fragment.format(doc=signed.doc, sig=signed.sig, id=signed.keys.key_id, tarball=TARBALL,
                               stranger=signed.stranger.key_id)
        assert done.stderr.startswith(f"superfluid: {want}"), done.stderr
        assert "Traceback" not in done.stderr


def test_no_trusted_key_at_all(env: dict[str, str], signed: Signed) -> None:
    done = _sf(env, "compat", "--release", str(signed.doc))
    assert done.code == 1
    assert (f"signed by key {signed.keys.key_id}, which is not a trusted key (trusted: none): if you trust that key, "
            f"name its .pub file with --key FILE or put it in $SUPERFLUID_HOME/keys/") in done.stderr


def test_tarball_not_beside_is_not_checked(env: dict[str, str], signed: Signed) -> None:
    (signed.folder / TARBALL).unlink()
    done = _sf(env, "compat", "--release", str(signed.doc), "--key", str(signed.keys.public), "--json")
    assert done.code == 0 and json.loads(done.stdout)["verification"]["tarball"] == "absent"


def test_a_broken_key_in_the_trust_store_is_an_error(env: dict[str, str], signed: Signed) -> None:
    keys = Path(env["SUPERFLUID_HOME"]) / "keys"
    keys.mkdir()
    (keys / "broken.pub").write_text("untrusted comment: x\nnope\n")
    done = _sf(env, "compat", "--release", str(signed.doc), "--key", str(signed.keys.public))
    assert done.code == 1 and f"superfluid: {keys / 'broken.pub'}: is not a minisign public key" in done.stderr


@pytest.mark.parametrize(("args", "fragment"), [
    pytest.param(("--release", "{doc}", "--key", "{missing}"), "--key {missing}: no such file", id="missing-key-file"),
    pytest.param(("--key", "{pub}"), "--key and --require-signature go with --release", id="key-without-release"),
    pytest.param(("--require-signature",), "--key and --require-signature go with --release", id="require-alone"),
])
def test_usage_errors(env: dict[str, str], signed: Signed, tmp_path: Path, args: tuple[str, ...],
                      fragment: str) -> None:
    subs = {"doc": str(signed.doc), "missing": str(tmp_path / "none.pub"), "pub": str(signed.keys.public)}
    done = _sf(env, "compat", *(a.format(**subs) for a in args))
    assert done.code == 2 and f"superfluid: {fragment.format(**subs)}" in done.stderr


# -- over HTTP (loopback) ---------------------------------------------------------------------------------

REPO = "superfluid/toolchain"


def _publish(server: ReleaseServer, signed: Signed, *, with_signature: bool = True) -> str:
    files = [signed.doc, signed.folder / TARBALL] + ([signed.sig] if with_signature else [])
    server.add_release(REPO, "v9.9", {p.name: p.read_bytes() for p in files})
    return server.download_url(REPO, "v9.9", DOC)


def test_url_fetches_the_signature_and_the_tarball_beside_it(env: dict[str, str], signed: Signed,
                                                             release_server: ReleaseServer) -> None:
    url = _publish(release_server, signed)
    done = _sf(env, "compat", "--release", url, "--key", str(signed.keys.public), "--json")
    assert done.code == 0, done.stderr
    verification = json.loads(done.stdout)["verification"]
    assert verification["verdict"] == f"verified by key {signed.keys.key_id}" and verification["tarball"] == "checked"
    fetched = [r.path for r in release_server.log]
    assert fetched == [release_server.download_path(REPO, "v9.9", n) for n in (DOC, f"{DOC}.minisig", TARBALL)]


def test_url_without_a_signature_is_unsigned(env: dict[str, str], signed: Signed,
                                             release_server: ReleaseServer) -> None:
    url = _publish(release_server, signed, with_signature=False)
    done = _sf(env, "compat", "--release", url)
    assert done.code == 0 and "signature: unsigned" in done.stdout
    assert f"superfluid: warning: {url} is unsigned" in done.stderr
    required = _sf(env, "compat", "--release", url, "--require-signature")
    assert required.code == 1 and f"(no {url}.minisig), and --require-signature was given" in required.stderr


def test_url_of_a_changed_document_is_refused(env: dict[str, str], signed: Signed,
                                              release_server: ReleaseServer) -> None:
    _change_doc(signed)
    url = _publish(release_server, signed)
    done = _sf(env, "compat", "--release", url, "--key", str(signed.keys.public))
    assert done.code == 1 and f"superfluid: {url}: its signature does not verify" in done.stderr
    assert release_server.download_path(REPO, "v9.9",
                                        TARBALL) not in [r.path for r in release_server.log]  # refused first
