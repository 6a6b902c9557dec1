"""Provenance through a fleet (issue 46, items 2-4): a lock records who builds each engine's assets,
``mirror sync`` places each asset's Sigstore bundle beside it (only one that proves it), and an install
from the lock checks it against the lock's identity: from the mirror folder, or from the lock's own
URLs. Bundles are the test Sigstore's (tests/installer/trust/sigstore_simulator.py), published by the
loopback release server's attestations API."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from superfluid.installer.fleet import lockfile
from tests.fleet.conftest import BASERT, Machine, machine_at
from tests.installer.trust.sigstore_simulator import Claims, SigstoreSimulator
from tests.release_server import ReleaseServer

ASSET = "basert-engine-linux-x64-0.4.0.tar.gz"
BUILT_BY = Claims(repository=BASERT, workflow=".github/workflows/release.yml", ref="refs/tags/v0.4.0")


@pytest.fixture(scope="module")
def sigstore() -> SigstoreSimulator:
    return SigstoreSimulator()


@pytest.fixture
def root(sigstore: SigstoreSimulator, tmp_path: Path) -> Path:
    return sigstore.write_root(tmp_path / "trusted_root.json")


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
                                                                 sigstore: SigstoreSimulator, root: Path) -> None:
    _attest(fleet_server, sigstore)
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(root)
    path, _ = _lock(admin)
    run = admin.superfluid("mirror", "sync", "engines", "--json")
    assert run.code == 0, run.stderr
    beside = f"{BASERT}/releases/download/v0.4.0/{ASSET}.sigstore.json"
    assert run.json()["bundles"] == [beside]
    assert (admin.cwd / "engines" / beside).is_file()
    text = admin.superfluid("mirror", "sync", "engines")  # in place: nothing asked, nothing placed
    assert text.code == 0 and "bundle" not in text.stdout, text.stdout

    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(root))
    fleet_server.clear_log()
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--mirror",
                          str(admin.cwd / "engines"), "--json")
    assert run.code == 0, run.stderr
    [asset] = run.json()["installs"][0]["receipt"]["provenance"]["assets"]
    assert asset["proven"]["repository"] == BASERT and asset["found_at"].endswith(beside)
    assert fleet_server.log == []  # the mirror's bundle, never GitHub's


def test_sync_refuses_a_bundle_that_does_not_prove_its_asset(admin: Machine, fleet_server: ReleaseServer,
                                                             sigstore: SigstoreSimulator, root: Path) -> None:
    _attest(fleet_server, sigstore, BUILT_BY.but(repository="mallory/baseRT"))
    admin.env["SUPERFLUID_SIGSTORE_ROOT"] = str(root)
    _lock(admin)
    run = admin.superfluid("mirror", "sync", "engines")
    assert run.code == 1, run.stdout
    assert f"{ASSET}: its Sigstore bundle does not prove it was built by {BASERT} at refs/tags/v*" in run.stderr
    assert not list((admin.cwd / "engines").rglob("*.sigstore.json"))


def test_an_install_from_a_lock_asks_the_identity_it_was_locked_with(tmp_path: Path, admin: Machine,
                                                                     fleet_server: ReleaseServer,
                                                                     sigstore: SigstoreSimulator, root: Path) -> None:
    """The lock's identity, not the recipe's: a lock that names another workflow refuses a bundle of
    the release workflow (found beside the lock's own URL, GitHub's attestations for a machine that
    names the loopback GitHub)."""
    _attest(fleet_server, sigstore)
    path, lock = _lock(admin)
    other = {"repository": BASERT, "workflow": ".github/workflows/nightly.yml", "ref": "refs/tags/v*"}
    lockfile.write(path, dataclasses.replace(lock, engines=tuple(dataclasses.replace(e, built_by=other)
                                                                 for e in lock.engines)))
    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(root), SUPERFLUID_GITHUB_API=fleet_server.url)
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
                                                                    sigstore: SigstoreSimulator, root: Path) -> None:
    _attest(fleet_server, sigstore)
    path, _ = _lock(admin)
    node = machine_at(tmp_path, "node", SUPERFLUID_SIGSTORE_ROOT=str(root), SUPERFLUID_GITHUB_API=fleet_server.url)
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--json")
    assert run.code == 0, run.stderr
    [asset] = run.json()["installs"][0]["receipt"]["provenance"]["assets"]
    assert "/attestations/sha256:" in asset["found_at"] and asset["proven"]["repository"] == BASERT
