"""``runtime/basert/bundles``: what a release asset's name says (platform, backend, version; an ABI
asset's number), and the backend a platform's unsuffixed bundle is."""

from __future__ import annotations

import pytest

from superfluid.runtime.basert.bundles import default_backend, parse_abi_asset_name, parse_bundle_name

BUNDLES = [
    ("basert-engine-macos-arm64-0.3.0.tar.gz", ("macos-arm64", "metal", "0.3.0")),
    ("basert-engine-linux-arm64-cuda-0.3.0.tar.gz", ("linux-arm64", "cuda", "0.3.0")),
    ("basert-engine-linux-x64-0.4.0.tar.gz", ("linux-x64", "cpu", "0.4.0")),
    ("basert-engine-linux-x64-0.4.1rc1.tar.gz", ("linux-x64", "cpu", "0.4.1rc1")),
    ("basert-engine-win-x64-0.4.0.zip", None),
    ("basert-engine-linux-x64-0.4.0.tar.gz.sha256", None),
    ("basert-engine-abi-1.txt", None),
    ("baseRT-engine-linux-x64-0.4.0.tar.gz", None),
    ("basert-engine-macos-x64-0.4.0.tar.gz", ("macos-x64", "cpu", "0.4.0")),
    ("basert-engine-linux-x64-cuda_12.4-0.4.0.tar.gz", ("linux-x64", "cuda_12.4", "0.4.0")),
    ("basert-engine-linux-x64-0.4.tar.gz", None),
    ("basert-engine-linux-x64-CUDA-0.4.0.tar.gz", None),
    ("basert-engine-linux-riscv-0.4.0.tar.gz", None),
]


@pytest.mark.parametrize("name,expected", BUNDLES, ids=[b[0] for b in BUNDLES])
def test_parse_bundle_name(name: str, expected: tuple | None) -> None:
    b = parse_bundle_name(name)
    assert (None if b is None else (b.platform, b.backend, b.version)) == expected


@pytest.mark.parametrize("name,expected", [
    ("basert-engine-abi-1.txt", 1), ("basert-engine-abi-12.txt", 12), ("basert-engine-abi-01.txt", None),
    ("basert-engine-abi-.txt", None), ("basert-engine-abi-1.txt.sha256", None),
    ("basert-engine-abi-0.txt", 0), ("basert-engine-abi-x.txt", None),
])
def test_parse_abi_asset_name(name: str, expected: int | None) -> None:
    assert parse_abi_asset_name(name) == expected


@pytest.mark.parametrize(("platform", "backend"), [("macos-arm64", "metal"), ("macos-x64", "cpu"), ("linux-x64", "cpu"),
                                                   ("linux-arm64", "cpu")])
def test_default_backend(platform: str, backend: str) -> None:
    assert default_backend(platform) == backend
    assert parse_bundle_name(f"basert-engine-{platform}-1.0.0.tar.gz").backend == backend  # type: ignore[union-attr]
