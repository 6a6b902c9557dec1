"""``runtime/basert/adapter``: its declarations from the header and the recipe alone (pins, compat,
versions per host); how it is shown is tests/basert/test_presentation.py."""

from __future__ import annotations

from superfluid.runtime.basert.adapter import ADAPTER as BASERT
from superfluid.runtime.hostfacts.host import Host
from tests.declarations.conftest import version_rows as _rows

LINUX_X64 = Host(os="linux", arch="x64")
LINUX_ARM64_GPU = Host(os="linux", arch="arm64", nvidia_driver="580.95.05")
LINUX_ARM64 = Host(os="linux", arch="arm64")
MACOS_ARM64 = Host(os="macos", arch="arm64")


def test_basert_recipe_carries_upstream_pins_and_no_invented_digest() -> None:
    pins = {p["version"]: p for p in BASERT.recipe["pinned"]}
    assert list(pins) == ["0.4.0", "0.3.0", "0.2.6"]
    assert pins["0.4.0"]["abi"] == 1 and "abi" not in pins["0.3.0"] and "abi" not in pins["0.2.6"]
    assets = {a["name"]: a for p in pins.values() for a in p["assets"]}
    assert assets["basert-engine-linux-arm64-cuda-0.3.0.tar.gz"]["size"] == 45848292
    assert assets["basert-engine-linux-arm64-cuda-0.3.0.tar.gz"]["sha256"] == \
        "937fcf5331f34fc90f64409dc3389f6f6fe22862cd109ca307973f520010a6ad"
    assert assets["basert-engine-macos-arm64-0.3.0.tar.gz"]["sha256"] == \
        "c81ede9f41a5fe8636075ee41da5eb8c593c0acb85b6ffccfcef4af38a6e6dde"
    assert assets["basert-engine-linux-arm64-cuda-0.2.6.tar.gz"]["sha256"] == \
        "c4a71e0d684280929f49ae52101ff44d269db0ba12f3124fba0ff3e9ddda770f"
    assert assets["basert-engine-macos-arm64-0.2.6.tar.gz"]["size"] == 18727923
    for name in ("basert-engine-linux-arm64-cuda-0.4.0.tar.gz", "basert-engine-macos-arm64-0.4.0.tar.gz"):
        assert "sha256" not in assets[name] and "size" not in assets[name]


def test_basert_compat_states_the_header_and_the_pins_it_drives() -> None:
    part = BASERT.compat()
    assert part["requires"] == {"header": "0.4.0", "abi": 1}
    assert part["unnumbered_line"] == "0.3"
    assert part["installs"] == [
        {"version": "0.4.0", "abi": 1, "platforms": ["linux-arm64", "macos-arm64"]},
        {"version": "0.3.0", "abi": None, "platforms": ["linux-arm64", "macos-arm64"]},
    ]
    assert [o["name"] for o in part["options"]] == ["kv-bits", "lib"]


def test_basert_versions_on_apple_silicon() -> None:
    rows = _rows(BASERT.versions(MACOS_ARM64, ["0.3.0-metal"]))
    assert list(rows) == ["0.4.0", "0.3.0", "0.2.6"]
    assert rows["0.4.0"]["installs"] is True and rows["0.4.0"]["install"] == "0.4.0-metal"
    assert rows["0.4.0"]["digest"] == "release" and rows["0.3.0"]["digest"] == "pinned"
    assert rows["0.3.0"]["installed"] is True and rows["0.4.0"]["installed"] is False
    assert rows["0.2.6"]["tested"] is False and rows["0.2.6"]["install"] == "0.2.6-metal"
    assert rows["0.2.6"]["verdict"] == "unnumbered 0.2.6, not of the 0.3 line; this superfluid drives ABI 1"
    assert rows["0.2.6"]["installs"] == rows["0.2.6"]["verdict"]  # the command is a value, not words
    assert [f["argv"] for f in rows["0.2.6"]["fixes"]] == [
        ["superfluid", "runtime", "install", "basert", "--version", "0.2.6", "--untested"]]
    assert "verdict" not in rows["0.4.0"]


def test_basert_versions_on_linux_arm64_need_an_nvidia_driver() -> None:
    assert _rows(BASERT.versions(LINUX_ARM64_GPU, []))["0.4.0"]["install"] == "0.4.0-cuda"
    row = _rows(BASERT.versions(LINUX_ARM64, []))["0.4.0"]
    assert row["install"] is None and "needs an NVIDIA driver" in row["installs"]


def test_basert_versions_where_baseRT_publishes_nothing() -> None:
    for row in _rows(BASERT.versions(LINUX_X64, [])).values():
        assert row["install"] is None
        assert row["installs"].startswith("baseRT publishes engines for linux-arm64 (cuda) and macos-arm64 (metal)")
