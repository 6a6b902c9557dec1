"""Provenance through a fleet (issue 46, items 2-4): a lock records who builds each engine's assets,
``mirror sync`` places each asset's Sigstore bundle beside it (only one that proves it), and an install
from the lock checks it against the lock's identity: from the mirror folder, or from the lock's own
URLs. Bundles are the test Sigstore's (tests/installer/trust/sigstore_simulator.py), published by the
loopback release server's attestations API."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.push import refer
from superfluid.installer.sources.oci.client import registry_for
from superfluid.installer.sources.oci.ref import Layer, asset_manifest, parse_ref, referrers_tag
from superfluid.settings import settings_of
from tests import cli
from tests.fleet.conftest import BASERT, Machine, machine_at
from tests.fleet.registry import Registry
from tests.installer.trust.sigstore_simulator import Claims, SigstoreSimulator
from tests.release_server import ReleaseServer

ASSET = "basert-engine-linux-x64-0.4.0.tar.gz"
BUILT_BY = Claims(repository=BASERT, workflow=".github/workflows/release.yml", ref="refs/tags/v0.4.0")


def _lock(admin: Machine) -> tuple[Path, lockfile.Lock]:
    run = admin.superfluid("lock", "--runtime", "basert", "--platform", "linux-x64", "--backend", "cpu")
    assert run.code == 0, run.stderr
    path = admin.cwd / "superfluid.lock"
    return path, lockfile.read(path)[0]


def _attest(server: ReleaseServer, sigstore: SigstoreSimulator, claims: Claims = BUILT_BY) -> None:
    server.attest(BASERT, "v0.4.0", ASSET, sigstore.sign(server.asset_data(BASERT, "v0.4.0", ASSET), claims))


def test_a_lock_records_who_builds_each_engine(admin: Machine) -> None:
    path, lock = _lock(admin)
    assert {e.built_by["repository"] for e in lock.engines if e.built_by} == {BASERT}
    assert all(e.built_by == {"repository": BASERT, "workflow": None, "ref": "refs/tags/v*"} for e in lock.engines)
    assert '[engine.built_by]\nrepository = "basecompute/baseRT"\nref = "refs/tags/v*"\n' in path.read_text()


def test_sync_places_the_bundle_and_a_machine_installs_it_proven(tmp_path: Path, admin: Machine,
                                                                 fleet_server: ReleaseServer,
                                                                 sigstore: SigstoreSimulator,
                                                                 sigstore_root_file: Path) -> None:
    _attest(fleet_server, sigstore)
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(sigstore_root_file)
    path, _ = _lock(admin)
    run = admin.superfluid("mirror", "sync", "engines", "--json")
    assert run.code == 0, run.stderr
    beside = f"{BASERT}/releases/download/v0.4.0/{ASSET}.sigstore.json"
    assert run.json()["bundles"] == [beside]
    assert (admin.cwd / "engines" / beside).is_file()
    text = admin.superfluid("mirror", "sync", "engines")  # in place: nothing asked, nothing placed
    assert text.code == 0 and "bundle" not in text.stdout, text.stdout

    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(sigstore_root_file))
    fleet_server.clear_log()
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--mirror",
                          str(admin.cwd / "engines"), "--json")
    assert run.code == 0, run.stderr
    [asset] = run.json()["installs"][0]["receipt"]["provenance"]["assets"]
    assert asset["proven"]["repository"] == BASERT and asset["found_at"].endswith(beside)
    assert fleet_server.log == []  # the mirror's bundle, never GitHub's


def test_sync_refuses_a_bundle_that_does_not_prove_its_asset(admin: Machine, fleet_server: ReleaseServer,
                                                             sigstore: SigstoreSimulator,
                                                             sigstore_root_file: Path) -> None:
    _attest(fleet_server, sigstore, BUILT_BY.but(repository="mallory/baseRT"))
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(sigstore_root_file)
    _lock(admin)
    run = admin.superfluid("mirror", "sync", "engines")
    assert run.code == 1, run.stdout
    assert f"{ASSET}: its Sigstore bundle does not prove it was built by {BASERT} at refs/tags/v*" in run.stderr
    assert not list((admin.cwd / "engines").rglob("*.sigstore.json"))


BESIDE = f"{BASERT}/releases/download/v0.4.0/{ASSET}.sigstore.json"


def test_mirror_verify_proves_each_bundle_beside_its_asset(admin: Machine, fleet_server: ReleaseServer,
                                                           sigstore: SigstoreSimulator,
                                                           sigstore_root_file: Path) -> None:
    """Each bundle beside an asset still proves it was built by the identity the lock names; one that
    does not is a problem as a file with other bytes is, and the sync the verify names puts back the
    one that proves it."""
    _attest(fleet_server, sigstore)
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(sigstore_root_file)
    _lock(admin)
    assert admin.superfluid("mirror", "sync", "engines").code == 0
    run = admin.superfluid("mirror", "verify", "engines", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["bundles"] == 1 and run.json()["problems"] == []
    proving = (admin.cwd / "engines" / BESIDE).read_bytes()
    data = fleet_server.asset_data(BASERT, "v0.4.0", ASSET)
    (admin.cwd / "engines" / BESIDE).write_text(json.dumps(sigstore.sign(data, BUILT_BY.but(
        repository="mallory/baseRT"))))
    run = admin.superfluid("mirror", "verify", "engines")
    assert run.code == 1, run.stdout
    assert f"{BESIDE}: was signed by a workflow of mallory/baseRT, not of {BASERT}" in run.stdout, run.stdout
    assert "1 problem against" in run.stderr, run.stderr
    fixed = cli.paste(run.fix("mirror", "sync"), run, env=admin.env, cwd=admin.cwd)
    assert fixed.code == 0, fixed.stderr
    assert (admin.cwd / "engines" / BESIDE).read_bytes() == proving
    assert admin.superfluid("mirror", "verify", "engines").code == 0


@pytest.mark.parametrize("plant", ["fifo", "link", "not-a-bundle"])
def test_mirror_verify_reports_a_bundle_that_is_no_bundle_file(admin: Machine, fleet_server: ReleaseServer,
                                                               sigstore: SigstoreSimulator, sigstore_root_file: Path,
                                                               plant: str) -> None:
    _attest(fleet_server, sigstore)
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(sigstore_root_file)
    _lock(admin)
    assert admin.superfluid("mirror", "sync", "engines").code == 0
    beside = admin.cwd / "engines" / BESIDE
    beside.unlink()
    if plant == "fifo":
        os.mkfifo(beside)
    elif plant == "link":
        (admin.cwd / "elsewhere.json").write_bytes(b"{}")
        beside.symlink_to(admin.cwd / "elsewhere.json")
    else:
        beside.write_bytes(b"[1, 2")
    run = admin.superfluid("mirror", "verify", "engines", "--json", timeout=30)
    assert run.code == 1, run.stdout
    [problem] = run.json()["problems"]
    assert problem["path"] == BESIDE, problem
    said = {"fifo": "cannot be read as a Sigstore bundle: it is a FIFO",
            "link": "cannot be read as a Sigstore bundle: it is a symbolic link",
            "not-a-bundle": "is not a Sigstore bundle"}[plant]
    assert problem["fault"].startswith(said), problem


def test_an_install_from_a_lock_asks_the_identity_it_was_locked_with(tmp_path: Path, admin: Machine,
                                                                     fleet_server: ReleaseServer,
                                                                     sigstore: SigstoreSimulator,
                                                                     sigstore_root_file: Path) -> None:
    """The lock's identity, not the recipe's: a lock that names another workflow refuses a bundle of
    the release workflow (found beside the lock's own URL, GitHub's attestations for a machine that
    names the loopback GitHub)."""
    _attest(fleet_server, sigstore)
    path, lock = _lock(admin)
    other = {"repository": BASERT, "workflow": ".github/workflows/nightly.yml", "ref": "refs/tags/v*"}
    lockfile.write(path, dataclasses.replace(lock, engines=tuple(dataclasses.replace(e, built_by=other)
                                                                 for e in lock.engines)))
    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(sigstore_root_file),
                      SUPERFLUID_GITHUB_API=fleet_server.url)
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--json")
    assert run.code == 1, run.stdout
    error = run.json()["error"]
    assert error["code"] == "provenance-refused"
    assert ("was signed by the workflow .github/workflows/release.yml of basecompute/baseRT, not "
            ".github/workflows/nightly.yml") in error["message"], error
    assert node.installs("basert") == []
    assert [r.path for r in fleet_server.log if r.path.endswith(ASSET)] == []  # refused before the bytes


def test_the_bundle_of_a_lock_s_github_url_is_github_s_attestation(tmp_path: Path, admin: Machine,
                                                                    fleet_server: ReleaseServer,
                                                                    sigstore: SigstoreSimulator,
                                                                    sigstore_root_file: Path) -> None:
    _attest(fleet_server, sigstore)
    path, _ = _lock(admin)
    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(sigstore_root_file),
                      SUPERFLUID_GITHUB_API=fleet_server.url)
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--json")
    assert run.code == 0, run.stderr
    [asset] = run.json()["installs"][0]["receipt"]["provenance"]["assets"]
    assert "/attestations/sha256:" in asset["found_at"] and asset["proven"]["repository"] == BASERT


# -- an OCI registry: the bundle as a referrer of the asset's own manifest -----------------------------


def test_push_sends_the_bundle_as_a_referrer_and_an_install_from_the_registry_proves_it(
        tmp_path: Path, admin: Machine, fleet_server: ReleaseServer, sigstore: SigstoreSimulator,
        sigstore_root_file: Path, registry: Registry) -> None:
    _attest(fleet_server, sigstore)
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(sigstore_root_file)
    path, lock = _lock(admin)
    run = admin.superfluid("mirror", "push", registry.url, "--json")
    assert run.code == 0, run.stderr
    [asset] = [f for e in lock.engines for f in e.assets if f.name == ASSET]
    assert run.json()["bundles"] == [asset.path]
    subject = hashlib.sha256(asset_manifest(Layer(asset.path, asset.sha256, asset.size))).hexdigest()
    assert referrers_tag(subject) in registry.tags()  # docker-registry 2.8 has no referrers API: the tag schema

    fleet_server.clear_log()
    again = admin.superfluid("mirror", "push", registry.url, "--json")  # in place: nothing asked, nothing sent
    assert again.code == 0 and again.json()["bundles"] == [] and fleet_server.log == []

    for n, argv in enumerate((["--locked", str(path)], ["--version", "0.4.0"])):
        node = machine_at(tmp_path, f"node{n}", SUPERFLUID_SIGSTORE_ROOT=str(sigstore_root_file))
        run = node.superfluid("runtime", "install", "basert", *argv, "--mirror", registry.url, "--json")
        assert run.code == 0, run.stderr
        done = run.json()
        receipt = (done["installs"][0] if "installs" in done else done)["receipt"]
        [proof] = receipt["provenance"]["assets"]
        assert proof["proven"]["repository"] == BASERT, proof
        assert proof["found_at"].startswith(f"registry {registry.host}/fleet/engines referrers of {asset.path}")
    assert fleet_server.log == []


def test_a_registry_s_referrer_of_another_repository_is_refused(tmp_path: Path, admin: Machine,
                                                                fleet_server: ReleaseServer,
                                                                sigstore: SigstoreSimulator, sigstore_root_file: Path,
                                                                registry: Registry) -> None:
    path, lock = _lock(admin)
    assert admin.superfluid("mirror", "push", registry.url).code == 0  # no bundle: none sent
    [asset] = [f for e in lock.engines for f in e.assets if f.name == ASSET]
    data = fleet_server.asset_data(BASERT, "v0.4.0", ASSET)
    forged = json.dumps(sigstore.sign(data, BUILT_BY.but(repository="mallory/baseRT"))).encode()
    net = registry_for(parse_ref(registry.url), settings_of({"HOME": str(tmp_path)}), push=True)
    try:
        refer(net, asset_manifest(Layer(asset.path, asset.sha256, asset.size)), forged)
    finally:
        net.close()
    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(sigstore_root_file))
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--mirror", registry.url, "--json")
    assert run.code == 1, run.stdout
    assert run.json()["error"]["code"] == "provenance-refused"
    assert "was signed by a workflow of mallory/baseRT, not of basecompute/baseRT" in run.json()["error"]["message"]
    assert node.installs("basert") == []


def test_a_lock_that_requires_provenance_refuses_an_asset_without_a_bundle(tmp_path: Path, admin: Machine,
                                                                          fleet_server: ReleaseServer,
                                                                          sigstore_root_file: Path) -> None:
    run = admin.superfluid("lock", "--runtime", "basert", "--platform", "linux-x64", "--backend", "cpu",
                           "--require-provenance")
    assert run.code == 0, run.stderr
    path = admin.cwd / "superfluid.lock"
    assert 'provenance = "required"\n' in path.read_text()
    again = admin.superfluid("lock", "--upgrade")  # kept by every lock after
    assert again.code == 0 and lockfile.read(path)[0].provenance == "required"
    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(sigstore_root_file),
                      SUPERFLUID_GITHUB_API=fleet_server.url)
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--json")
    assert run.code == 1, run.stdout
    error = run.json()["error"]
    assert error["code"] == "provenance-required" and error["message"].startswith(f"{ASSET}: no provenance"), error
    assert node.installs("basert") == []
