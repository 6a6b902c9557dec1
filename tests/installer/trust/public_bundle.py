"""A bundle GitHub Actions made under the public Sigstore, and the file it signs, for the tests that check
the production trusted root offline (issue 46: "accepts a bundle made by GitHub Actions under the public
Sigstore for the file it signs").

Where a real one comes from without GitHub: pypi-attestations' sdist ships, among its test assets,
``pypi_attestations-0.0.19.tar.gz`` and the SLSA provenance v1 attestation its release workflow made for
it (``trailofbits/pypi-attestations``, ``.github/workflows/release.yml`` at ``refs/tags/v0.0.19``, logged
by the public Rekor on 2024-12-04), as a PEP 740 attestation. The sdist is fetched with pip, pinned by its
digest, into the native cache; the attestation is laid out as the v0.3 bundle it was made from (PEP 740
keeps the same certificate, log entry, statement and signature). When pip cannot fetch it, the tests
that need it are skipped, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import native_cache

__all__ = ["PublicBundle", "public_bundle", "REPOSITORY", "WORKFLOW", "REF", "COMMIT"]

_SDIST = "pypi_attestations-0.0.30.tar.gz"
_REQUIREMENT = "pypi-attestations==0.0.30"
_DIGEST = "14ff13c76bbef02a483c2b77532da02bfd746b5141b881f355e06b9807434423"
_ASSETS = "pypi_attestations-0.0.30/test/assets/"
_FILE = "pypi_attestations-0.0.19.tar.gz"
_ATTESTATION = "pypi_attestations-0.0.19.tar.gz.slsa.attestation"

REPOSITORY = "trailofbits/pypi-attestations"
WORKFLOW = ".github/workflows/release.yml"
REF = "refs/tags/v0.0.19"
COMMIT = "08802efe1f8e5fec4ad842d6b8ce97656092ee72"


@dataclass(frozen=True)
class PublicBundle:
    file: Path  # the sdist the workflow built
    bundle: Path  # its Sigstore bundle (v0.3, DSSE, SLSA provenance v1)


def _sdist(cache: Path) -> Path:
    path = cache / _SDIST
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    pinned = cache / f"{_SDIST}.requirements.txt"
    pinned.write_text(f"{_REQUIREMENT} --hash=sha256:{_DIGEST}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--no-binary",
                           "pypi-attestations", "-r", str(pinned), "-d", str(cache)], capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0 or not path.is_file():
        pytest.skip(f"{_REQUIREMENT} could not be fetched with pip (the registry is not reachable?): "
                    f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    return path


def _bundle_of(attestation: dict[str, object]) -> dict[str, object]:
    """The v0.3 bundle a PEP 740 attestation was made from (as pypi-attestations' ``to_bundle`` lays it)."""
    material = attestation["verification_material"]
    envelope = attestation["envelope"]
    assert isinstance(material, dict) and isinstance(envelope, dict)
    return {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {"certificate": {"rawBytes": material["certificate"]},
                                     "tlogEntries": material["transparency_entries"]},
            "dsseEnvelope": {"payload": envelope["statement"], "payloadType": "application/vnd.in-toto+json",
                             "signatures": [{"sig": envelope["signature"]}]}}


def public_bundle() -> PublicBundle:
    """The file and its bundle, under the native cache's ``sigstore/`` (fetched and laid out once)."""
    cache = native_cache() / "sigstore"
    file, bundle = cache / _FILE, cache / f"{_FILE}.sigstore.json"
    if not (file.is_file() and bundle.is_file()):
        with tarfile.open(_sdist(cache)) as sdist:
            data = {name: sdist.extractfile(_ASSETS + name) for name in (_FILE, _ATTESTATION)}
            assert all(data.values()), f"{_SDIST} lacks its test assets"
            raw = {name: f.read() for name, f in data.items() if f is not None}
        for path, content in ((file, raw[_FILE]), (bundle, json.dumps(_bundle_of(json.loads(raw[_ATTESTATION])))
                                                                .encode())):
            partial = path.with_name(f"{path.name}.{os.getpid()}.partial")  # two test processes at once
            partial.write_bytes(content)
            os.replace(partial, path)
    return PublicBundle(file, bundle)
