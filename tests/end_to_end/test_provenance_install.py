"""An install proves who built its assets with their Sigstore bundles before anything is staged (issue 46,
items 2-4), through the real CLI: bundles made by the test Sigstore (tests/installer/trust/
sigstore_simulator.py) and published by the loopback release server's attestations API
(``GET /repos/{owner}/{repo}/attestations/sha256:{hex}``); the trusted root is the simulator's, named by
``SUPERFLUID_SIGSTORE_ROOT``. Each hostile bundle is one row: refused, exit 1, the asset never fetched and
nothing under the home changed."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.schema import errors as schema_errors
from tests.conftest import Home
from tests.end_to_end import releases
from tests.installer.trust.sigstore_simulator import Claims, SigstoreSimulator
from tests.release_server import ReleaseServer

REPO = releases.REPO
TAG = "v0.4.0"
BUILT_BY = Claims(repository=REPO, workflow=".github/workflows/release.yml", ref="refs/tags/v0.4.0")


@pytest.fixture
def attested(cli_home: Home, server: ReleaseServer, sigstore: SigstoreSimulator, tmp_path: Path) -> Home:
    """``cli_home`` reading the loopback GitHub, trusting the simulator's root."""
    root = sigstore.write_root(tmp_path / "trusted_root.json")
    cli_home.env.update(SUPERFLUID_GITHUB_API=server.url, SUPERFLUID_SIGSTORE_ROOT=str(root))
    return cli_home


def asset_of(server: ReleaseServer, tag: str = TAG) -> tuple[str, bytes]:
    """The name and bytes of this machine's basert archive in release ``tag``."""
    name = releases.bundle_name(tag.removeprefix("v"))
    return name, server.asset_data(REPO, tag, name)


def downloads(server: ReleaseServer, name: str) -> list[str]:
    return [r.path for r in server.log if r.path.endswith("/" + name)]


def test_an_attested_asset_installs_with_what_its_bundle_proved(attested: Home, server: ReleaseServer,
                                                               sigstore: SigstoreSimulator) -> None:
    name, data = asset_of(server)
    bundle = sigstore.sign(data, BUILT_BY.but(run_id=4242))
    server.attest(REPO, TAG, name, bundle)
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--json")
    assert run.code == 0, run.stderr
    receipt = run.json()["receipt"]
    proof = receipt["provenance"]
    assert proof["built_by"] == {"repository": REPO, "workflow": None, "ref": "refs/tags/v*"}
    assert proof["trust_root"] == attested.env["SUPERFLUID_SIGSTORE_ROOT"]
    [asset] = proof["assets"]
    assert asset["name"] == name and asset["sha256"] == hashlib.sha256(data).hexdigest()
    assert asset["proven"]["repository"] == REPO and asset["proven"]["ref"] == "refs/tags/v0.4.0"
    assert asset["proven"]["run_url"].endswith("/actions/runs/4242/attempts/1")
    assert "/attestations/sha256:" in asset["found_at"]
    kept = attested.basert / "0.4.0-cpu" / asset["bundle"]
    assert json.loads(kept.read_bytes()) == bundle  # kept in the install, for runtime verify
    assert asset["bundle"] in {f["path"] for f in receipt["files"]}  # and recorded with its files
    text = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--reinstall")
    assert text.code == 0, text.stderr
    assert f"basert 0.4.0-cpu: built by {REPO} .github/workflows/release.yml at refs/tags/v0.4.0" in text.stdout


def test_an_asset_without_a_bundle_installs_and_says_no_provenance(attested: Home, server: ReleaseServer) -> None:
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0")
    assert run.code == 0, run.stderr
    assert "basert 0.4.0-cpu: no provenance" in run.stdout
    receipt = attested.receipt("0.4.0-cpu")
    assert [a["proven"] for a in receipt["provenance"]["assets"]] == [None]
    assert not (attested.basert / "0.4.0-cpu" / ".superfluid").exists()
    assert server.requests_to(f"/repos/{REPO}/attestations/sha256:")  # asked, answered 404


Hostile = Callable[[SigstoreSimulator, bytes], Any]
HOSTILE = [
    pytest.param(lambda s, data: s.sign(data, BUILT_BY.but(repository="mallory/baseRT")), "identity",
                 "was signed by a workflow of mallory/baseRT, not of basecompute/baseRT", id="another-repository"),
    pytest.param(lambda s, data: s.sign(data, BUILT_BY.but(ref="refs/heads/main")), "identity",
                 "was built from refs/heads/main, not refs/tags/v*", id="a-branch-where-tags-are-asked"),
    pytest.param(lambda s, data: s.sign(data + b"other bytes", BUILT_BY), "bytes",
                 "is for other bytes than basert-engine-", id="other-bytes"),
    pytest.param(lambda s, data: SigstoreSimulator(name="other").sign(data, BUILT_BY), "certificate",
                 "does not chain to a CA of the trusted root", id="an-untrusted-root"),
]


@pytest.mark.parametrize(("hostile", "step", "words"), HOSTILE)
def test_a_bundle_that_does_not_prove_the_asset_is_refused_before_anything_is_staged(
        attested: Home, server: ReleaseServer, sigstore: SigstoreSimulator, hostile: Hostile, step: str,
        words: str) -> None:
    name, data = asset_of(server)
    server.attest(REPO, TAG, name, hostile(sigstore, data))
    server.clear_log()
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--json")
    assert run.code == 1, run.stdout
    error = run.json()["error"]
    assert error["code"] == "provenance-refused", error
    assert error["message"].startswith(f"{name}: its Sigstore bundle does not prove it was built by {REPO} at "
                                       "refs/tags/v*: ")
    assert words in error["message"] and "nothing was installed" in error["message"]
    assert "Traceback" not in run.stderr
    assert downloads(server, name) == []  # refused before a byte of it was fetched
    assert attested.installs() == [] and attested.leftovers() == []
    text = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0")
    assert text.code == 1 and f"superfluid: {name}: its Sigstore bundle" in text.stderr


def test_one_bundle_that_proves_it_among_others_is_enough(attested: Home, server: ReleaseServer,
                                                         sigstore: SigstoreSimulator) -> None:
    """GitHub lists an asset's attestations of every predicate: one of them proving it installs it."""
    name, data = asset_of(server)
    sbom = sigstore.sign(data, BUILT_BY, statement=sigstore.statement(hashlib.sha256(data).hexdigest(),
                                                                      predicate_type="https://spdx.dev/Document/v2.3"))
    server.attest(REPO, TAG, name, sbom)
    server.attest(REPO, TAG, name, sigstore.sign(data, BUILT_BY))
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["receipt"]["provenance"]["assets"][0]["found_at"].endswith("(attestation 2)")


def test_an_answer_listing_ten_thousand_bundles_is_cut_and_said(attested: Home, server: ReleaseServer,
                                                               sigstore: SigstoreSimulator) -> None:
    name, data = asset_of(server)
    sha = hashlib.sha256(data).hexdigest()
    junk = {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "verificationMaterial": {}}
    listed = [{"bundle": junk} for _ in range(9_999)] + [{"bundle": sigstore.sign(data, BUILT_BY)}]
    server.attestations_answer(REPO, sha, {"attestations": listed})
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--json", timeout=60)
    assert run.code == 1, run.stdout
    message = run.json()["error"]["message"]
    assert "(the first 8 of the 10000 attestations it lists were examined)" in message, message
    assert attested.installs() == []


# -- a mirror: <asset>.sigstore.json beside the asset -------------------------------------------------


@pytest.mark.parametrize("where", ["folder", "url"])
def test_a_mirror_serves_the_bundle_beside_the_asset(attested: Home, server: ReleaseServer,
                                                     sigstore: SigstoreSimulator, tmp_path: Path, where: str) -> None:
    name, data = asset_of(server)
    bundle = sigstore.sign(data, BUILT_BY)
    server.attest(REPO, TAG, name, bundle)
    mirror = str(server.write_mirror(tmp_path / "mirror")) if where == "folder" else server.mirror_url
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--mirror", mirror, "--json")
    assert run.code == 0, run.stderr
    [asset] = run.json()["receipt"]["provenance"]["assets"]
    assert asset["proven"]["repository"] == REPO
    assert asset["found_at"].endswith(f"/v0.4.0/{name}.sigstore.json")
    assert json.loads((attested.basert / "0.4.0-cpu" / asset["bundle"]).read_bytes()) == bundle
    assert server.requests_to(f"/repos/{REPO}/attestations") == []  # the mirror's, never GitHub's


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _too_large(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate((10 << 20) + 1)


def _link_out(path: Path) -> None:
    outside = path.parent.parent.parent.parent.parent.parent.parent / "elsewhere.sigstore.json"
    outside.write_text("{}")
    path.symlink_to(outside)


@pytest.mark.parametrize(("plant", "words"), [(_fifo, "is a FIFO"), (_link_out, "is a symbolic link"),
                                               (_too_large, "is larger than 10485760 bytes")],
                         ids=["a-fifo", "a-link-out-of-the-folder", "larger-than-any-bundle"])
def test_a_bundle_in_a_mirror_folder_that_is_no_file_is_refused(attested: Home, server: ReleaseServer,
                                                                tmp_path: Path, plant: Callable[[Path], None],
                                                                words: str) -> None:
    name, _ = asset_of(server)
    root = server.write_mirror(tmp_path / "mirror")
    beside = root / REPO / "releases" / "download" / TAG / f"{name}.sigstore.json"
    plant(beside)
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--mirror", str(root), timeout=30)
    assert run.code == 1, run.stdout
    assert f"{beside}: cannot be read as a Sigstore bundle: it {words}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and attested.installs() == [] and attested.leftovers() == []


# -- --require-provenance ----------------------------------------------------------------------------


def test_require_provenance_refuses_an_asset_without_a_bundle(attested: Home, server: ReleaseServer) -> None:
    name, _ = asset_of(server)
    server.clear_log()
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--require-provenance", "--json")
    assert run.code == 1, run.stdout
    error = run.json()["error"]
    assert error["code"] == "provenance-required"
    assert error["message"].startswith(f"{name}: no provenance, and it is required: ")
    assert "holds no Sigstore bundle for it" in error["message"] and error["advice"], error
    assert downloads(server, name) == [] and attested.installs() == []
    text = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--require-provenance")
    assert text.code == 1 and "Traceback" not in text.stderr
    assert f"superfluid: {name}: no provenance, and it is required" in text.stderr


def test_require_provenance_installs_an_attested_asset(attested: Home, server: ReleaseServer,
                                                       sigstore: SigstoreSimulator) -> None:
    name, data = asset_of(server)
    server.attest(REPO, TAG, name, sigstore.sign(data, BUILT_BY))
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--require-provenance")
    assert run.code == 0, run.stderr
    assert attested.installs() == ["0.4.0-cpu"]


def test_require_provenance_refuses_a_file_named_by_hand(attested: Home, server: ReleaseServer,
                                                         tmp_path: Path) -> None:
    name, data = asset_of(server)
    local = tmp_path / name
    local.write_bytes(data)
    run = attested.superfluid("runtime", "install", "basert", "--from", str(local), "--require-provenance")
    assert run.code == 1, run.stdout
    assert "basert 0.4.0-cpu: no provenance, and it is required: a file named by hand (--from)" in run.stderr, \
        run.stderr
    assert attested.installs() == []


# -- shown, and checked again later --------------------------------------------------------------------


@pytest.fixture
def proven(attested: Home, server: ReleaseServer, sigstore: SigstoreSimulator) -> Home:
    """basert 0.4.0-cpu installed from the loopback GitHub, its archive proven by its bundle; then the
    GitHub it came from unreachable, and SUPERFLUID_SIGSTORE_ROOT unset (the install recorded its root)."""
    name, data = asset_of(server)
    server.attest(REPO, TAG, name, sigstore.sign(data, BUILT_BY.but(run_id=99)))
    run = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0")
    assert run.code == 0, run.stderr
    attested.env.update(SUPERFLUID_GITHUB_API="http://127.0.0.1:9", SUPERFLUID_SIGSTORE_ROOT="")
    return attested


def test_runtimes_and_runtime_list_show_what_was_proven(proven: Home) -> None:
    summary = {"proven": True, "repository": REPO, "workflow": ".github/workflows/release.yml",
               "ref": "refs/tags/v0.4.0", "commit": Claims().commit,
               "run_url": f"https://github.com/{REPO}/actions/runs/99/attempts/1"}
    [row] = [r for r in proven.superfluid("runtimes", "--json").json() if r["id"] == "basert"]
    assert row["provenance"] == summary
    [entry] = proven.superfluid("runtime", "list", "basert", "--json").json()["installs"]
    assert entry["provenance"] == summary


def test_doctor_shows_what_was_proven_of_each_install(proven: Home, server: ReleaseServer) -> None:
    """doctor's installed rows say what runtime list says of each install's provenance (one function)."""
    proven.env.update(SUPERFLUID_GITHUB_API=server.url)
    assert proven.superfluid("runtime", "install", "basert", "--version", "0.3.1").code == 0  # no bundle
    listed = {i["install"]: i["provenance"] for i in
              proven.superfluid("runtime", "list", "basert", "--json").json()["installs"]}
    run = proven.superfluid("doctor", "--json")
    assert run.code in (0, 1), run.stderr
    assert schema_errors(run.json(), "doctor") == []
    [row] = [r for r in run.json()["runtimes"] if r["id"] == "basert"]
    assert {i["install"]: i["provenance"] for i in row["installed"]} == listed
    assert listed["0.4.0-cpu"]["proven"] is True and listed["0.3.1-cpu"]["proven"] is False
    text = proven.superfluid("doctor")
    assert (f"    provenance: 0.4.0-cpu built by {REPO} .github/workflows/release.yml at refs/tags/v0.4.0; "
            "0.3.1-cpu no provenance\n") in text.stdout, text.stdout


def test_runtime_verify_checks_the_kept_bundle_again_offline(proven: Home) -> None:
    run = proven.superfluid("runtime", "verify", "basert", "--json")
    assert run.code == 0, run.stderr
    [verdict] = run.json()["installs"]
    assert verdict["provenance"] == {"ok": True, "assets": [releases.bundle_name("0.4.0")], "problem": None,
                                     "built_by": [f"{REPO} .github/workflows/release.yml at refs/tags/v0.4.0"]}
    text = proven.superfluid("runtime", "verify", "basert")
    assert text.code == 0 and "basert 0.4.0-cpu: provenance verified again: built by" in text.stdout


def _kept(home: Home) -> Path:
    [path] = (home.basert / "0.4.0-cpu" / ".superfluid" / "provenance").iterdir()
    return path


def test_runtime_verify_refuses_a_kept_bundle_altered(proven: Home) -> None:
    kept = _kept(proven)
    kept.write_bytes(kept.read_bytes().replace(b'"', b' "', 1))
    run = proven.superfluid("runtime", "verify", "basert", "--json")
    assert run.code == 1, run.stdout
    [verdict] = run.json()["installs"]
    assert verdict["ok"] is False  # a file not as recorded
    assert verdict["provenance"]["ok"] is True  # the same JSON, spaced otherwise: it still proves it


def test_runtime_verify_refuses_a_bundle_replaced_with_its_record(proven: Home, server: ReleaseServer,
                                                                  sigstore: SigstoreSimulator) -> None:
    """Whoever rewrites the kept bundle and the receipt's record of it alike (the files agree) is still
    caught: the bundle no longer proves what the receipt says was proven."""
    name, data = asset_of(server)
    forged = json.dumps(sigstore.sign(data, BUILT_BY.but(repository="mallory/baseRT"))).encode()
    kept = _kept(proven)
    kept.write_bytes(forged)
    receipt_path = proven.basert / "0.4.0-cpu" / "runtime.json"
    receipt = json.loads(receipt_path.read_text())
    for f in receipt["files"]:
        if f["path"].endswith(".sigstore.json"):
            f.update(size=len(forged), sha256=hashlib.sha256(forged).hexdigest())
            for k in ("mtime_ns", "ctime_ns", "inode"):
                f.pop(k, None)
    receipt_path.write_text(json.dumps(receipt))
    run = proven.superfluid("runtime", "verify", "basert", "--json")
    assert run.code == 1, run.stdout
    [verdict] = run.json()["installs"]
    assert verdict["ok"] is True and verdict["provenance"]["ok"] is False, verdict
    assert "was signed by a workflow of mallory/baseRT, not of basecompute/baseRT" in verdict["provenance"]["problem"]
    assert run.json()["error"]["code"] == "not-verified"
    text = proven.superfluid("runtime", "verify", "basert")
    assert text.code == 1 and f"basert 0.4.0-cpu: {kept}: was signed by a workflow of mallory" in text.stderr, \
        text.stderr


# -- a repair keeps it -----------------------------------------------------------------------------------


def _break_a_file(home: Home) -> None:
    (home.basert / "0.4.0-cpu" / "lib" / "LICENSE").write_bytes(b"")


def test_a_repair_keeps_the_bundles_that_proved_the_install(proven: Home) -> None:
    """The archives a repair extracts again do not hold the kept bundle: it is copied across from the
    install it repairs, verified again against the archive's recorded digest (GitHub unreachable: it is
    asked nothing), and the receipt's provenance stays."""
    before = proven.receipt("0.4.0-cpu")
    kept = _kept(proven).read_bytes()
    _break_a_file(proven)
    run = proven.superfluid("runtime", "repair", "basert", "0.4.0-cpu")
    assert run.code == 0, run.stderr
    assert _kept(proven).read_bytes() == kept
    assert proven.receipt("0.4.0-cpu")["provenance"] == before["provenance"]
    verify = proven.superfluid("runtime", "verify", "basert", "--json")
    assert verify.code == 0, verify.stdout + verify.stderr
    assert verify.json()["installs"][0]["provenance"]["ok"] is True


def _spaced(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"', b' "', 1))


def _forged(path: Path) -> None:
    doc = json.loads(path.read_bytes())
    doc["verificationMaterial"]["tlogEntries"][0]["logIndex"] = "7"
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("tamper", [_spaced, _forged], ids=["spaced-otherwise", "no-longer-proving"])
def test_a_repair_fetches_a_tampered_kept_bundle_again_from_its_source(proven: Home, server: ReleaseServer,
                                                                     tamper: Callable[[Path], None]) -> None:
    """A kept bundle that is not the one its receipt records (other bytes, even when it still proves the
    archive) is not copied across: the install's source is asked for the one recorded, which is verified
    again before anything is staged."""
    kept = _kept(proven)
    recorded = kept.read_bytes()
    tamper(kept)
    proven.env.update(SUPERFLUID_GITHUB_API=server.url)
    server.clear_log()
    run = proven.superfluid("runtime", "repair", "basert", "0.4.0-cpu")
    assert run.code == 0, run.stderr
    assert _kept(proven).read_bytes() == recorded
    assert server.requests_to(f"/repos/{REPO}/attestations/sha256:")
    assert proven.superfluid("runtime", "verify", "basert").code == 0


def test_a_repair_offline_fetches_a_tampered_kept_bundle_from_the_cache(proven: Home, server: ReleaseServer) -> None:
    """The attestations answer the install read is in the cache: an offline repair reads the bundle there."""
    kept = _kept(proven)
    recorded = kept.read_bytes()
    _forged(kept)
    proven.env.update(SUPERFLUID_GITHUB_API=server.url)
    server.clear_log()
    run = proven.superfluid("runtime", "repair", "basert", "0.4.0-cpu", "--offline")
    assert run.code == 0, run.stderr
    assert _kept(proven).read_bytes() == recorded and server.log == []


def test_a_repair_refuses_a_tampered_kept_bundle_its_source_cannot_give_again(proven: Home, server: ReleaseServer
                                                                             ) -> None:
    """GitHub refusing to answer: the bundle its receipt records cannot be had again, and the install is
    not put back without it; nothing is changed."""
    kept = _kept(proven)
    _forged(kept)
    _break_a_file(proven)
    tampered = kept.read_bytes()
    sha = proven.receipt("0.4.0-cpu")["provenance"]["assets"][0]["sha256"]
    proven.env.update(SUPERFLUID_GITHUB_API=server.url)
    server.fault(f"/repos/{REPO}/attestations/sha256:{sha}", "status", status=410, times=10)
    run = proven.superfluid("runtime", "repair", "basert", "0.4.0-cpu")
    assert run.code == 1, run.stdout
    assert "Traceback" not in run.stderr
    assert (f"superfluid: {kept}: is not the Sigstore bundle its receipt records (its SHA-256 is "
            in run.stderr), run.stderr
    assert "and its source could not be asked for it again (" in run.stderr, run.stderr
    assert "nothing was changed: a repair puts back the bundle that proved the install" in run.stderr, run.stderr
    assert kept.read_bytes() == tampered  # nothing changed
    assert (proven.basert / "0.4.0-cpu" / "lib" / "LICENSE").read_bytes() == b""


# -- the identity asked: the recipe's, or a --for release's -------------------------------------------


def test_the_compat_document_and_each_plan_name_who_builds_the_assets(attested: Home) -> None:
    compat = attested.superfluid("compat", "--json")
    assert compat.code == 0, compat.stderr
    runtimes = compat.json()["runtimes"]
    assert runtimes["basert"]["built_by"] == {"repository": REPO, "workflow": None, "ref": "refs/tags/v*"}
    assert runtimes["llamacpp"]["built_by"] == {"repository": "ggml-org/llama.cpp",
                                                "workflow": ".github/workflows/release.yml", "ref": "refs/tags/*"}
    plans = attested.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--dry-run", "--json")
    assert plans.code == 0, plans.stderr
    assert plans.json()["plans"][0]["built_by"] == runtimes["basert"]["built_by"]


def test_an_install_for_another_release_asks_the_identity_its_document_names(
        attested: Home, server: ReleaseServer, sigstore: SigstoreSimulator, tmp_path: Path) -> None:
    doc = attested.superfluid("compat", "--json").json()
    doc["release"] = {"name": "superfluid", "version": "0.9.0"}
    nightly = {"repository": REPO, "workflow": ".github/workflows/nightly.yml", "ref": "refs/tags/*"}
    doc["runtimes"]["basert"]["built_by"] = nightly
    path = tmp_path / "superfluid-0.9.0.compat.json"
    path.write_text(json.dumps(doc))
    name, data = asset_of(server)
    server.attest(REPO, TAG, name, sigstore.sign(data, BUILT_BY))
    line = ("runtime", "install", "basert", "--version", "0.4.0", "--for", str(path))
    plans = attested.superfluid(*line, "--dry-run", "--json")
    assert plans.code == 0, plans.stderr
    assert plans.json()["plans"][0]["built_by"] == nightly
    run = attested.superfluid(*line, "--json")
    assert run.code == 1, run.stdout
    assert ("was signed by the workflow .github/workflows/release.yml of basecompute/baseRT, not "
            ".github/workflows/nightly.yml") in run.json()["error"]["message"]
    assert attested.installs() == []


def test_a_source_that_cannot_be_asked_is_no_provenance_and_refused_when_required(
        attested: Home, server: ReleaseServer, sigstore: SigstoreSimulator, tmp_path: Path) -> None:
    """An archive the cache holds installs again with its mirror down: the bundle could not be asked
    for, which is said (a mirror that answered "none" could say as much); required, it is refused."""
    lock = str(tmp_path / "superfluid.lock")
    assert attested.superfluid("lock", "--runtime", "basert", "--mirror", server.mirror_url, "-o", lock).code == 0
    assert attested.superfluid("runtime", "install", "--locked", lock, "--mirror", server.mirror_url).code == 0
    down = ("--mirror", "http://127.0.0.1:9/")
    again = attested.superfluid("runtime", "install", "--locked", lock, *down, "--reinstall", "--json")
    assert again.code == 0, again.stderr
    [asset] = again.json()["installs"][0]["receipt"]["provenance"]["assets"]
    assert asset["proven"] is None and "connection refused by 127.0.0.1:9" in asset["unasked"], asset
    required = attested.superfluid("runtime", "install", "--locked", lock, *down, "--reinstall",
                                   "--require-provenance")
    assert required.code == 1, required.stdout
    assert "no provenance, and it is required: its Sigstore bundle could not be asked for (" in required.stderr
