"""``installer/trust/proving``: a plan's assets proven by their Sigstore bundles before anything is staged,
an install's kept bundles verified again, and a repair's bundles had again. Bundles are made by the test
Sigstore (tests/installer/trust/sigstore_simulator.py) and found where an install finds them: beside the
asset in a mirror folder, or through the loopback GitHub's attestations API."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import ProvenanceRefused, ProvenanceRequired
from superfluid.installer.settings import Settings
from superfluid.installer.sources.bundles import BUNDLES_EXAMINED, SUFFIX, Bundles, Found
from superfluid.installer.trust.proving import (
    KEPT,
    Proofs,
    keep_again,
    kept_path,
    proof_of,
    prove,
    proves,
    proving_bundle,
    unproven,
    verify_kept,
)
from superfluid.runtime.planning import Plan, PlanAsset, Sha256
from tests.installer.trust.sigstore_simulator import Claims, SigstoreSimulator, write_bundle
from tests.release_server import ReleaseServer

REPO = "acme/engine"
TAG = "v1.0.0"
CLAIMS = Claims(repository=REPO, workflow=".github/workflows/release.yml", ref=f"refs/tags/{TAG}")
BUILT_BY = {"repository": REPO, "workflow": ".github/workflows/release.yml", "ref": "refs/tags/v*"}
ENGINE, CUDA = b"the engine's archive\n" * 50, b"its CUDA runtime\n" * 50


def _sha(data: bytes) -> Sha256:
    return Sha256(hashlib.sha256(data).hexdigest())


def _asset(name: str, url: str, data: bytes | None) -> PlanAsset:
    return PlanAsset(name=name, url=url, sha256=_sha(data) if data is not None else None, size=None,
                     digest_source="listing")


def _plan(*assets: PlanAsset, built_by: Any = BUILT_BY) -> Plan:
    return Plan(id="engine", version="1.0.0", backend="cpu", assets=assets, tested=True, chosen_by="newest",
                abi=None, why="the newest release", built_by=built_by)


def _settings(tmp_path: Path, root: Path | None, **more: Any) -> Settings:
    return Settings(home=str(tmp_path / "home"), sigstore_root=str(root) if root else None, **more)


class Folder:
    """A mirror folder: each asset a file, and beside it, when given, its bundle (``<asset>.sigstore.json``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def put(self, name: str, data: bytes, bundle: dict[str, Any] | None = None) -> PlanAsset:
        (self.path / name).write_bytes(data)
        if bundle is not None:
            write_bundle(self.bundle(name), bundle)
        return _asset(name, (self.path / name).as_uri(), data)

    def bundle(self, name: str) -> Path:
        return self.path / f"{name}{SUFFIX}"


@pytest.fixture
def folder(tmp_path: Path) -> Folder:
    return Folder(tmp_path / "mirror")


# -- prove: each asset by the bundles its source holds ----------------------------------------------------


def test_each_asset_with_a_bundle_is_proven_and_its_bundle_kept(tmp_path: Path, folder: Folder,
                                                               sigstore: SigstoreSimulator,
                                                               sigstore_root_file: Path) -> None:
    engine = folder.put("engine.tar.gz", ENGINE, sigstore.sign(ENGINE, CLAIMS.but(run_id=7)))
    cuda = folder.put("cuda.tar.gz", CUDA, sigstore.sign(CUDA, CLAIMS))
    proofs = prove(_plan(engine, cuda), None, _settings(tmp_path, sigstore_root_file))
    assert proofs.proven and proofs.trust_root == str(sigstore_root_file)
    first, second = proofs.assets
    assert first.proven is not None and second.proven is not None
    assert (first.proven.repository, first.proven.ref, first.sha256) == (REPO, f"refs/tags/{TAG}", _sha(ENGINE))
    assert first.bundle is not None and first.bundle.where == str(folder.bundle("engine.tar.gz"))
    assert proofs.kept() == {f"{KEPT}/engine.tar.gz{SUFFIX}": folder.bundle("engine.tar.gz").read_bytes(),
                             f"{KEPT}/cuda.tar.gz{SUFFIX}": folder.bundle("cuda.tar.gz").read_bytes()}
    assert proofs.describe() == (f"built by {REPO} .github/workflows/release.yml at refs/tags/{TAG} "
                                 f"({first.proven.run_url})")
    recorded = proofs.to_json()
    assert recorded["built_by"] == BUILT_BY and recorded["trust_root"] == str(sigstore_root_file)
    assert recorded["assets"][0] == {"name": "engine.tar.gz", "sha256": _sha(ENGINE),
                                     "proven": first.proven.to_json(), "bundle": kept_path("engine.tar.gz"),
                                     "found_at": str(folder.bundle("engine.tar.gz"))}


def test_an_asset_without_a_bundle_installs_unproven_and_loads_no_root(tmp_path: Path, folder: Folder) -> None:
    # the root named does not exist: loading it would fail, and nothing asks for it
    proofs = prove(_plan(folder.put("engine.tar.gz", ENGINE)), None, _settings(tmp_path, tmp_path / "absent.json"))
    assert not proofs.proven and proofs.trust_root is None and proofs.kept() == {}
    [proof] = proofs.assets
    assert (proof.proven, proof.bundle, proof.unasked) == (None, None, None)
    assert proofs.describe() == "no provenance (no Sigstore bundle was published for it)"
    assert proofs.to_json()["assets"] == [{"name": "engine.tar.gz", "sha256": _sha(ENGINE), "proven": None}]


def test_an_asset_without_a_bundle_is_refused_where_provenance_is_required(tmp_path: Path, folder: Folder) -> None:
    plan = _plan(folder.put("engine.tar.gz", ENGINE))
    with pytest.raises(ProvenanceRequired, match="engine.tar.gz: no provenance, and it is required: ") as e:
        prove(plan, None, _settings(tmp_path, None, require_provenance=True))
    assert f"holds no Sigstore bundle for it (sha256 {_sha(ENGINE)})" in str(e.value)
    assert e.value.advice is not None and f"GitHub's attestations of {REPO}" in e.value.advice


def test_some_assets_proven_are_not_a_proven_install(tmp_path: Path, folder: Folder, sigstore: SigstoreSimulator,
                                                    sigstore_root_file: Path) -> None:
    engine = folder.put("engine.tar.gz", ENGINE, sigstore.sign(ENGINE, CLAIMS))
    proofs = prove(_plan(engine, folder.put("cuda.tar.gz", CUDA)), None, _settings(tmp_path, sigstore_root_file))
    assert not proofs.proven and list(proofs.kept()) == [kept_path("engine.tar.gz")]
    assert proofs.describe().endswith("; no provenance for the rest of its archives")


def test_an_asset_not_in_the_release_is_not_asked_for(tmp_path: Path, folder: Folder) -> None:
    proofs = prove(_plan(_asset("gone.tar.gz", (folder.path / "gone.tar.gz").as_uri(), None)), None,
                   _settings(tmp_path, None, require_provenance=True))
    assert [(p.name, p.sha256, p.proven) for p in proofs.assets] == [("gone.tar.gz", "", None)]


def _other_run(sigstore: SigstoreSimulator, data: bytes) -> dict[str, Any]:
    return sigstore.sign(data, CLAIMS.but(repository="mallory/engine"))


def _other_bytes(sigstore: SigstoreSimulator, data: bytes) -> dict[str, Any]:
    return sigstore.sign(data + b"more", CLAIMS)


def _other_sigstore(sigstore: SigstoreSimulator, data: bytes) -> dict[str, Any]:
    return SigstoreSimulator(name="other").sign(data, CLAIMS)


@pytest.mark.parametrize(("hostile", "step"), [
    pytest.param(_other_run, "identity", id="built-by-another-repository"),
    pytest.param(_other_bytes, "bytes", id="a-bundle-of-other-bytes"),
    pytest.param(_other_sigstore, "certificate", id="signed-under-another-root"),
])
def test_a_bundle_that_does_not_prove_its_asset_is_refused(tmp_path: Path, folder: Folder,
                                                           sigstore: SigstoreSimulator, sigstore_root_file: Path,
                                                           hostile: Callable[[SigstoreSimulator, bytes], Any],
                                                           step: str) -> None:
    plan = _plan(folder.put("engine.tar.gz", ENGINE, hostile(sigstore, ENGINE)))
    with pytest.raises(ProvenanceRefused) as e:
        prove(plan, None, _settings(tmp_path, sigstore_root_file))
    assert (e.value.named, e.value.step) == ("engine.tar.gz", step)
    assert e.value.wanted == f"{REPO} .github/workflows/release.yml at refs/tags/v*"
    assert f"its Sigstore bundle does not prove it was built by {e.value.wanted}: " in e.value.fault
    assert e.value.fault.endswith("; nothing was installed")
    assert f"[bundle: {folder.bundle('engine.tar.gz')}]" in e.value.fault


@pytest.mark.parametrize(("built_by", "fragment"), [
    pytest.param({"repository": "not a repository"}, "is not OWNER/NAME", id="a-bad-repository"),
    pytest.param({"workflow": "release.yml"}, "an object with repository", id="no-repository"),
])
def test_a_plan_that_names_no_identity_to_prove_is_refused(tmp_path: Path, folder: Folder, built_by: Any,
                                                           fragment: str) -> None:
    with pytest.raises(ProvenanceRefused, match=fragment) as e:
        prove(_plan(folder.put("engine.tar.gz", ENGINE), built_by=built_by), None, _settings(tmp_path, None))
    assert (e.value.named, e.value.step) == ("engine 1.0.0-cpu", "identity")


def test_a_file_named_by_hand_asks_nothing_and_is_refused_where_provenance_is_required(tmp_path: Path,
                                                                                     folder: Folder) -> None:
    # the file beside it is no bundle: had it been read, it would have been refused
    plan = _plan(folder.put("engine.tar.gz", ENGINE, {"not": "a bundle"}), built_by=None)
    proofs = prove(plan, None, _settings(tmp_path, None))
    assert proofs == unproven(plan) == Proofs(None, None, proofs.assets)
    assert [(p.name, p.sha256, p.proven, p.bundle) for p in proofs.assets] == [("engine.tar.gz", _sha(ENGINE), None,
                                                                                None)]
    with pytest.raises(ProvenanceRequired, match=r"names no release workflow to prove it was built by"):
        prove(plan, None, _settings(tmp_path, None, require_provenance=True))


# -- prove, through GitHub's attestations API ------------------------------------------------------------------


@pytest.fixture
def github(release_server: ReleaseServer) -> ReleaseServer:
    release_server.add_release(REPO, TAG, {"engine.tar.gz": ENGINE})
    return release_server


def _github_plan(server: ReleaseServer) -> Plan:
    return _plan(_asset("engine.tar.gz", server.download_url(REPO, TAG, "engine.tar.gz"), ENGINE))


def test_the_first_attestation_that_proves_the_asset_is_the_proof(tmp_path: Path, github: ReleaseServer,
                                                                  sigstore: SigstoreSimulator,
                                                                  sigstore_root_file: Path) -> None:
    """GitHub lists an asset's attestations of every predicate: one that does not prove it (an SBOM's, a
    fork's) before the one that does is passed over."""
    github.attest(REPO, TAG, "engine.tar.gz", _other_run(sigstore, ENGINE))
    github.attest(REPO, TAG, "engine.tar.gz", sigstore.sign(ENGINE, CLAIMS.but(run_id=99)))
    proofs = prove(_github_plan(github), None, _settings(tmp_path, sigstore_root_file, github_api=github.url))
    [proof] = proofs.assets
    assert proof.proven is not None and proof.proven.run_url.endswith("/actions/runs/99/attempts/1")
    assert proof.bundle is not None and proof.bundle.where.endswith("(attestation 2)")
    assert [r.path.split("?")[0] for r in github.log if "/attestations/" in r.path] == [
        f"/repos/{REPO}/attestations/sha256:{_sha(ENGINE)}"]


def test_none_of_the_attestations_examined_proving_it_says_how_many(tmp_path: Path, github: ReleaseServer,
                                                                    sigstore: SigstoreSimulator,
                                                                    sigstore_root_file: Path) -> None:
    listed = BUNDLES_EXAMINED + 2
    answer = {"attestations": [{"bundle": _other_run(sigstore, ENGINE)} for _ in range(listed)]}
    github.attestations_answer(REPO, _sha(ENGINE), answer)
    with pytest.raises(ProvenanceRefused) as e:
        prove(_github_plan(github), None, _settings(tmp_path, sigstore_root_file, github_api=github.url))
    assert (f"; none of the {BUNDLES_EXAMINED} bundles it holds proves it (the first {BUNDLES_EXAMINED} of the "
            f"{listed} attestations it lists were examined); nothing was installed") in e.value.fault
    assert e.value.step == "identity" and e.value.found is not None and "mallory/engine" in e.value.found


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_source_that_cannot_be_asked_is_no_bundle_and_says_why(tmp_path: Path) -> None:
    api = f"http://127.0.0.1:{_closed_port()}"
    plan = _plan(_asset("engine.tar.gz", f"{api}/{REPO}/releases/download/{TAG}/engine.tar.gz", ENGINE))
    settings = _settings(tmp_path, None, github_api=api, fetch=FetchConfig(refused_retries=0))
    proofs = prove(plan, None, settings)
    [proof] = proofs.assets
    assert proof.proven is None and proof.unasked is not None
    assert proofs.describe() == f"no provenance (its Sigstore bundle could not be asked for: {proof.unasked})"
    with pytest.raises(ProvenanceRequired, match=r"its Sigstore bundle could not be asked for \("):
        prove(plan, None, _settings(tmp_path, None, github_api=api, fetch=FetchConfig(refused_retries=0),
                                    require_provenance=True))


# -- proof_of and proves: one file's bundles (mirror sync, mirror verify) ----------------------------------------


def test_proof_of_is_the_first_bundle_that_proves_the_file(tmp_path: Path, sigstore: SigstoreSimulator,
                                                           sigstore_root_file: Path) -> None:
    good = Found(json.dumps(sigstore.sign(ENGINE, CLAIMS)).encode(), "second")
    bundles = Bundles((Found(json.dumps(_other_run(sigstore, ENGINE)).encode(), "first"), good), "here", 2)
    proof = proof_of("engine.tar.gz", _sha(ENGINE), bundles, BUILT_BY, _settings(tmp_path, sigstore_root_file))
    assert proof.bundle == good and proof.proven is not None and proof.proven.repository == REPO
    with pytest.raises(ProvenanceRefused, match="here holds no Sigstore bundle for it"):
        proof_of("engine.tar.gz", _sha(ENGINE), Bundles((), "here"), BUILT_BY, _settings(tmp_path, sigstore_root_file))


def test_proving_bundle_is_the_one_beside_a_file_that_proves_it_or_none(tmp_path: Path, folder: Folder,
                                                                          sigstore: SigstoreSimulator,
                                                                          sigstore_root_file: Path) -> None:
    settings = _settings(tmp_path, sigstore_root_file)
    engine = folder.put("engine.tar.gz", ENGINE, sigstore.sign(ENGINE, CLAIMS))
    proof = proving_bundle("engine.tar.gz", engine.url, _sha(ENGINE), BUILT_BY, settings)
    assert proof is not None and proof.bundle is not None and proof.proven is not None
    assert proof.bundle.data == folder.bundle("engine.tar.gz").read_bytes() and proof.proven.repository == REPO
    bare = folder.put("cuda.tar.gz", CUDA)
    assert proving_bundle("cuda.tar.gz", bare.url, _sha(CUDA), BUILT_BY, settings) is None
    other = folder.put("other.tar.gz", CUDA, _other_run(sigstore, CUDA))
    with pytest.raises(ProvenanceRefused):
        proving_bundle("other.tar.gz", other.url, _sha(CUDA), BUILT_BY, settings)


def test_proves_says_what_one_bundle_proves_or_why_not(tmp_path: Path, sigstore: SigstoreSimulator,
                                                       sigstore_root_file: Path) -> None:
    settings = _settings(tmp_path, sigstore_root_file)
    bundle = Found(json.dumps(sigstore.sign(ENGINE, CLAIMS)).encode(), "engine.tar.gz.sigstore.json")
    assert proves("engine.tar.gz", _sha(ENGINE), bundle, BUILT_BY, settings).ref == f"refs/tags/{TAG}"
    with pytest.raises(ProvenanceRefused) as e:
        proves("cuda.tar.gz", _sha(CUDA), bundle, BUILT_BY, settings)
    assert e.value.named == "engine.tar.gz.sigstore.json"
    with pytest.raises(ValueError, match="is not OWNER/NAME"):
        proves("engine.tar.gz", _sha(ENGINE), bundle, {"repository": "nobody"}, settings)


# -- an install's kept bundles: verified again, and had again by a repair ------------------------------------------


def _installed(tmp_path: Path, folder: Folder, sigstore: SigstoreSimulator, root: Path) -> tuple[Path, dict[str, Any],
                                                                                                 Plan]:
    """An install of the engine proven by its bundle (kept below it), its receipt's provenance, its plan."""
    plan = _plan(folder.put("engine.tar.gz", ENGINE, sigstore.sign(ENGINE, CLAIMS)))
    proofs = prove(plan, None, _settings(tmp_path, root))
    install = tmp_path / "installs" / "1.0.0-cpu"
    for path, data in proofs.kept().items():
        (install / path).parent.mkdir(parents=True, exist_ok=True)
        (install / path).write_bytes(data)
    return install, proofs.to_json(), plan


def test_the_kept_bundles_still_prove_what_the_receipt_records(tmp_path: Path, folder: Folder,
                                                               sigstore: SigstoreSimulator,
                                                               sigstore_root_file: Path) -> None:
    install, recorded, _ = _installed(tmp_path, folder, sigstore, sigstore_root_file)
    [proven] = verify_kept(str(install), recorded)
    assert proven.to_json() == recorded["assets"][0]["proven"]
    assert verify_kept(str(install), {**recorded, "assets": [{**recorded["assets"][0], "proven": None}]}) == []


def _swap(path: Path, sigstore: SigstoreSimulator) -> None:  # another asset's bundle in its place
    write_bundle(path, sigstore.sign(CUDA, CLAIMS))


def _remove(path: Path, sigstore: SigstoreSimulator) -> None:
    path.unlink()


@pytest.mark.parametrize(("spoil", "fragment"), [
    pytest.param(_swap, "is for other bytes than engine.tar.gz", id="another-asset-s-bundle"),
    pytest.param(_remove, "is missing: the bundle that proved engine.tar.gz is no longer kept", id="removed"),
])
def test_a_kept_bundle_that_no_longer_proves_it_is_refused(tmp_path: Path, folder: Folder, sigstore: SigstoreSimulator,
                                                           sigstore_root_file: Path,
                                                           spoil: Callable[[Path, SigstoreSimulator], None],
                                                           fragment: str) -> None:
    install, recorded, _ = _installed(tmp_path, folder, sigstore, sigstore_root_file)
    kept = install / kept_path("engine.tar.gz")
    spoil(kept, sigstore)
    with pytest.raises(ProvenanceRefused, match=fragment) as e:
        verify_kept(str(install), recorded)
    assert e.value.named == str(kept)


def test_a_repair_keeps_the_bundle_it_keeps_when_it_is_the_one_recorded(tmp_path: Path, folder: Folder,
                                                                        sigstore: SigstoreSimulator,
                                                                        sigstore_root_file: Path) -> None:
    install, recorded, plan = _installed(tmp_path, folder, sigstore, sigstore_root_file)
    folder.bundle("engine.tar.gz").unlink()  # its source no longer holds it: the kept one is read
    kept = (install / kept_path("engine.tar.gz")).read_bytes()
    assert keep_again(str(install), recorded, plan, _settings(tmp_path, None)) == {kept_path("engine.tar.gz"): kept}


@pytest.mark.parametrize("spoil", [_swap, _remove], ids=["another-asset-s-bundle", "removed"])
def test_a_repair_has_the_recorded_bundle_again_from_its_source(
        tmp_path: Path, folder: Folder, sigstore: SigstoreSimulator, sigstore_root_file: Path,
        spoil: Callable[[Path, SigstoreSimulator], None]) -> None:
    install, recorded, plan = _installed(tmp_path, folder, sigstore, sigstore_root_file)
    spoil(install / kept_path("engine.tar.gz"), sigstore)
    again = keep_again(str(install), recorded, plan, _settings(tmp_path, None))
    assert again == {kept_path("engine.tar.gz"): folder.bundle("engine.tar.gz").read_bytes()}


def test_a_repair_whose_bundle_is_to_be_had_nowhere_changes_nothing(tmp_path: Path, folder: Folder,
                                                                     sigstore: SigstoreSimulator,
                                                                     sigstore_root_file: Path) -> None:
    install, recorded, plan = _installed(tmp_path, folder, sigstore, sigstore_root_file)
    kept = install / kept_path("engine.tar.gz")
    _swap(kept, sigstore)
    write_bundle(folder.bundle("engine.tar.gz"), sigstore.sign(ENGINE, CLAIMS))  # another bundle of the asset
    with pytest.raises(ProvenanceRefused, match="holds no bundle of those bytes; nothing was changed") as e:
        keep_again(str(install), recorded, plan, _settings(tmp_path, None))
    assert e.value.named == str(kept) and "is not the Sigstore bundle its receipt records" in e.value.fault
    with pytest.raises(ProvenanceRefused, match="names no identity a bundle can prove") as e:
        keep_again(str(install), {**recorded, "built_by": None}, plan, _settings(tmp_path, None))
    assert e.value.step == "identity"
