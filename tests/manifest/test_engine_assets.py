"""``manifest/engine_assets``' rules: a bundle's name read back through the installer's own name
rule, the ABI asset's name, and what a built libbaseRT states about itself. (``ci/engine-assets``
end to end, writing the files, is ``tests/ci/test_engine_assets.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.manifest.engine_assets import EngineRefused, abi_asset_name, bundle_name, library_facts
from superfluid.runtime.basert.bundles import parse_abi_asset_name
from superfluid.runtime.kernel.errors import UsageError
from tests.basert.basert_helpers import lib_path


@pytest.mark.parametrize(("platform", "version", "backend", "name"), [
    ("linux-x64", "0.4.0", None, "basert-engine-linux-x64-0.4.0.tar.gz"),
    ("linux-arm64", "0.4.0", "cuda", "basert-engine-linux-arm64-cuda-0.4.0.tar.gz"),
    ("macos-arm64", "0.5.0rc1", None, "basert-engine-macos-arm64-0.5.0rc1.tar.gz"),
    ("linux-x64", "0.4.0", "cuda_12.4", "basert-engine-linux-x64-cuda_12.4-0.4.0.tar.gz"),
    ("linux-x64", "0.4.0", "cpu", "basert-engine-linux-x64-cpu-0.4.0.tar.gz"),
])
def test_bundle_name(platform: str, version: str, backend: str | None, name: str) -> None:
    assert bundle_name(platform, version, backend) == name


@pytest.mark.parametrize(("platform", "version", "backend", "fragment"), [
    ("windows-x64", "0.4.0", None, "is not a baseRT bundle name an install reads"),
    ("linux-x64", "0.4", None, "is not a baseRT bundle name an install reads"),
    ("linux-x64", "v0.4.0", None, "is not a baseRT bundle name an install reads"),
    ("linux-x64", "0.4.0", "CUDA", "--backend 'CUDA': a backend is lower-case letters"),
    ("linux-x64", "0.4.0", "cuda-12", "--backend 'cuda-12': a backend is lower-case letters"),
])
def test_bundle_name_refused(platform: str, version: str, backend: str | None, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        bundle_name(platform, version, backend)


@pytest.mark.parametrize("abi", [0, 1, 12])
def test_abi_asset_name_reads_back(abi: int) -> None:
    assert parse_abi_asset_name(abi_asset_name(abi)) == abi


@pytest.mark.parametrize(("variant", "version", "abi", "driven"), [
    ("0.4.0", "0.4.0", 1, True),
    ("0.3.0", "0.3.0", None, True),
    ("0.5.0", "0.5.0", 2, False),
])
def test_library_facts_are_what_the_library_states(engines: Path, variant: str, version: str, abi: int | None,
                                                   driven: bool) -> None:
    facts = library_facts(str(lib_path(engines, variant)))
    assert (facts.version, facts.abi, facts.driven is None) == (version, abi, driven)
    assert facts.path == str(lib_path(engines, variant))


def test_a_library_missing_a_symbol_is_not_an_engine(engines: Path) -> None:
    with pytest.raises(EngineRefused, match="not a baseRT library"):
        library_facts(str(lib_path(engines, "missing-symbol")))
