"""The adapters' declarations from their recipes alone: basert pins and ABI verdicts, MLX, llama.cpp."""

from __future__ import annotations

from typing import Any

from superfluid.runtime.basert.adapter import ADAPTER as BASERT
from superfluid.runtime.host import Host
from superfluid.runtime.llamacpp.adapter import ADAPTER as LLAMACPP
from superfluid.runtime.mlx.adapter import ADAPTER as MLX
from tests.declarations.conftest import SPEC_LLAMA_OPTIONS, validate

LINUX_X64 = Host("linux", "x64")
LINUX_ARM64_GPU = Host("linux", "arm64", nvidia_driver="580.95.05")
LINUX_ARM64 = Host("linux", "arm64")
MACOS_ARM64 = Host("macos", "arm64")

# -- basert ---------------------------------------------------------------------------------------


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


def _rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    validate(rows, "versions")
    return {r["version"]: r for r in rows}


def test_basert_versions_on_apple_silicon() -> None:
    rows = _rows(BASERT.versions(MACOS_ARM64, ["0.3.0-metal"]))
    assert list(rows) == ["0.4.0", "0.3.0", "0.2.6"]
    assert rows["0.4.0"]["installs"] is True and rows["0.4.0"]["install"] == "0.4.0-metal"
    assert rows["0.4.0"]["digest"] == "release" and rows["0.3.0"]["digest"] == "pinned"
    assert rows["0.3.0"]["installed"] is True and rows["0.4.0"]["installed"] is False
    assert rows["0.2.6"]["tested"] is False and rows["0.2.6"]["install"] == "0.2.6-metal"
    assert rows["0.2.6"]["verdict"] == "unnumbered 0.2.6, not of the 0.3 line; this superfluid drives ABI 1"
    assert "--untested" in rows["0.2.6"]["installs"]
    assert "verdict" not in rows["0.4.0"]


def test_basert_versions_on_linux_arm64_need_an_nvidia_driver() -> None:
    assert _rows(BASERT.versions(LINUX_ARM64_GPU, []))["0.4.0"]["install"] == "0.4.0-cuda"
    row = _rows(BASERT.versions(LINUX_ARM64, []))["0.4.0"]
    assert row["install"] is None and "needs an NVIDIA driver" in row["installs"]


def test_basert_versions_where_baseRT_publishes_nothing() -> None:
    for row in _rows(BASERT.versions(LINUX_X64, [])).values():
        assert row["install"] is None
        assert row["installs"].startswith("baseRT publishes engines for linux-arm64 (cuda) and macos-arm64 (metal)")


# -- mlx ------------------------------------------------------------------------------------------


def test_mlx_recipe_pins_every_wheel_and_the_python() -> None:
    tested = MLX.recipe["tested"][0]
    wheels = {w["name"]: w for w in tested["wheels"]}
    assert (tested["version"], tested["mlx_lm"]) == ("0.32.2", "0.31.3")
    assert wheels["mlx"]["sha256"] == "77217798a2b036bae9f213b851d4cde4581893787c9964458b7d471f86036bd6"
    assert wheels["mlx-lm"]["file"] == "mlx_lm-0.31.3-py3-none-any.whl"
    assert all(len(w["sha256"]) == 64 for w in tested["wheels"])
    assert MLX.recipe["python"]["version"] == "3.12.14"
    assert MLX.recipe["python"]["assets"]["macos-arm64"]["sha256"] == \
        "1bb3e53d231ee2c8881e8daf6426f4dd95bff0dda496af0f3af300357aa998d0"


def test_mlx_compat_and_versions() -> None:
    assert MLX.compat()["installs"] == [{"mlx": "0.32.2", "mlx_lm": "0.31.3", "python": "3.12"}]
    assert MLX.compat()["platforms"] == ["macos-arm64"]
    here = _rows(MLX.versions(LINUX_X64, []))["0.32.2"]
    assert here["install"] is None and here["installs"].startswith("MLX runs on Apple silicon only")
    mac = _rows(MLX.versions(MACOS_ARM64, ["0.32.2-metal"]))["0.32.2"]
    assert (mac["installs"], mac["install"], mac["installed"], mac["digest"]) == (True, "0.32.2-metal", True, "pinned")
    assert [o.name for o in MLX.options()] == ["venv", "prefill-chunk", "cache-limit-mb"]


# -- llama.cpp ------------------------------------------------------------------------------------


def test_llamacpp_compat_lists_the_tested_builds_with_their_layouts() -> None:
    part = LLAMACPP.compat()
    assert [(t["build"], t["layout"]) for t in part["tested"]] == [("b11642", "v2"), ("b11284", "v1")]


def test_llamacpp_options_are_the_spec_list() -> None:
    assert [o.name for o in LLAMACPP.options()] == SPEC_LLAMA_OPTIONS


def test_llamacpp_versions_newest_first() -> None:
    rows = _rows(LLAMACPP.versions(LINUX_X64, ["b11284-vulkan"]))
    assert list(rows) == ["b11642", "b11284"]
    assert rows["b11642"]["install"] == "b11642-cpu" and rows["b11642"]["installs"] is True
    assert rows["b11284"]["installed"] is True and rows["b11642"]["installed"] is False
    assert rows["b11642"]["layout"] == "v2"
    mac = _rows(LLAMACPP.versions(MACOS_ARM64, []))
    assert mac["b11642"]["install"] == "b11642-metal"
