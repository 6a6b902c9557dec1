"""A release as the release workflow makes it, proven end to end (issue 46, item 5): the pack step's
files (``manifest.pack``'s own writer, as ``ci/pack --attested`` in a tag push's run of
``acme/superfluid``'s ``release.yml`` writes them), then the steps of ``release.yml`` after it run by the
job's model (``tests/ci/release_job.py``) with the attest step signing through a Sigstore made in memory
(``tests/installer/trust/sigstore_simulator.py``: one bundle whose statement names every subject, as
``actions/attest-build-provenance`` makes it). What was uploaded is a release folder: the manifest
service verifies it and serves the workflow its documents state, and each uploaded file's
``<file>.sigstore.json`` proves, with the real verifier, that this workflow built those bytes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from superfluid.installer.trust.identity import Identity
from superfluid.installer.trust.provenance import ProvenanceRefused, Root, verify
from superfluid.manifest.index import build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey, generate
from superfluid.manifest.pack import attesting_workflow
from superfluid.manifest.release_files import ATTESTED_SUFFIXES, BUNDLE_SUFFIX, PACK_SUFFIXES
from superfluid.manifest.settings import ENV_WORKFLOW_REF, read_settings
from superfluid.manifest.sources import DirectorySource
from tests.ci.release_job import Job, load, run_release_job
from tests.conftest import ROOT
from tests.installer.trust.sigstore_simulator import Claims, SigstoreSimulator
from tests.manifest.release_folders import base_document, vary, write_release

VERSION = "0.4.0"
#: what GitHub Actions sets in a run of release.yml for the tag v0.4.0 of acme/superfluid
WORKFLOW_REF = f"acme/superfluid/.github/workflows/release.yml@refs/tags/v{VERSION}"
CLAIMS = Claims(repository="acme/superfluid", workflow=".github/workflows/release.yml", ref=f"refs/tags/v{VERSION}")


def _multi_subject_bundle(sigstore: SigstoreSimulator, claims: Claims, subjects: list[Path]) -> bytes:
    """One bundle whose in-toto statement names every subject by name and sha256."""
    statement = json.loads(sigstore.statement("0" * 64, claims=claims))
    statement["subject"] = [{"name": p.name, "digest": {"sha256": hashlib.sha256(p.read_bytes()).hexdigest()}}
                            for p in subjects]
    return json.dumps(sigstore.sign(b"", claims, statement=json.dumps(statement).encode())).encode()


class Released:
    """The release's files as uploaded, in one folder (a mirror's release folder), and what signed them."""

    def __init__(self, tmp: Path, sigstore: SigstoreSimulator, key: SecretKey, claims: Claims = CLAIMS) -> None:
        attested = attesting_workflow(read_settings({ENV_WORKFLOW_REF: WORKFLOW_REF}))
        packed = write_release(tmp / "pack", "dist", vary(base_document(), VERSION), key, attested)
        job: Job = run_release_job(load((ROOT / ".github" / "workflows" / "release.yml").read_text()),
                                   {p.name: p.read_bytes() for p in packed.iterdir()}, tmp / "runner",
                                   lambda subjects: _multi_subject_bundle(sigstore, claims, subjects))
        self.folder = tmp / "releases" / f"v{VERSION}"
        self.folder.mkdir(parents=True)
        for name, path in job.uploaded.items():
            shutil.copyfile(path, self.folder / name)
        self.key = key

    def attested_files(self) -> list[Path]:
        artifacts = [p.name for p in self.folder.iterdir() if not p.name.endswith((*PACK_SUFFIXES, BUNDLE_SUFFIX))]
        return sorted(self.folder / (a + s) for a in artifacts for s in ATTESTED_SUFFIXES)

    def served_identity(self) -> Identity:
        index = build_index(DirectorySource(self.folder.parent).snapshot(), [TrustedKey(self.key.public(), "k.pub")])
        assert [r.version for r in index.releases] == [VERSION], index.rejected
        served = index.releases[0].to_json()["attested_by"]
        return Identity.from_json(served)


def _check(file: Path, bundle: Path, wanted: Identity, root: Root) -> str:
    proven = verify(hashlib.sha256(file.read_bytes()).hexdigest(), bundle.read_bytes(), wanted, root,
                    named=bundle.name, subject=file.name)
    return f"{proven.repository} {proven.workflow} {proven.ref}"


def test_each_uploaded_file_is_proven_built_by_the_workflow_the_manifest_serves(
        tmp_path: Path, sigstore: SigstoreSimulator, sigstore_root: Root) -> None:
    released = Released(tmp_path, sigstore, generate())
    wanted = released.served_identity()
    assert wanted == Identity("acme/superfluid", ".github/workflows/release.yml", f"refs/tags/v{VERSION}")
    files = released.attested_files()
    assert [p.name for p in files] == [f"superfluid_toolchain-{VERSION}-py3-none-any.whl",
                                       f"superfluid_toolchain-{VERSION}-py3-none-any.whl.compat.json",
                                       f"superfluid_toolchain-{VERSION}.tar.gz",
                                       f"superfluid_toolchain-{VERSION}.tar.gz.compat.json"]
    for file in files:
        proven = _check(file, file.with_name(file.name + BUNDLE_SUFFIX), wanted, sigstore_root)
        assert proven == f"acme/superfluid .github/workflows/release.yml refs/tags/v{VERSION}"


def test_a_bundle_proves_only_the_bytes_it_was_made_for(tmp_path: Path, sigstore: SigstoreSimulator,
                                                         sigstore_root: Root) -> None:
    released = Released(tmp_path, sigstore, generate())
    sdist = released.folder / f"superfluid_toolchain-{VERSION}.tar.gz"
    swapped = tmp_path / sdist.name
    swapped.write_bytes(b"an sdist a release account was made to upload\n")
    with pytest.raises(ProvenanceRefused) as refused:
        _check(swapped, sdist.with_name(sdist.name + BUNDLE_SUFFIX), released.served_identity(), sigstore_root)
    assert refused.value.step == "bytes"


def test_a_release_attested_by_another_workflow_than_its_documents_state_is_refused(
        tmp_path: Path, sigstore: SigstoreSimulator, sigstore_root: Root) -> None:
    fork = CLAIMS.but(repository="mallory/superfluid")  # the files re-attested in another repository's run
    released = Released(tmp_path, sigstore, generate(), fork)
    wheel = released.folder / f"superfluid_toolchain-{VERSION}-py3-none-any.whl"
    with pytest.raises(ProvenanceRefused) as refused:
        _check(wheel, wheel.with_name(wheel.name + BUNDLE_SUFFIX), released.served_identity(), sigstore_root)
    assert refused.value.step == "identity" and refused.value.found == "mallory/superfluid"
