"""The five --json outputs through the real `superfluid` command: they validate and carry the facts."""

from __future__ import annotations

import json
from pathlib import Path

from superfluid.runtime import registry
from tests.declarations.conftest import MACOS_ARM64, SPEC_LLAMA_OPTIONS, base_env, sf, sf_json, validate


def test_compat_json_is_the_merged_document(home: Path) -> None:
    doc = sf_json(base_env(home), "compat", "--json")
    validate(doc, "compat")
    assert doc["schema"] == "superfluid-compat/1"
    assert doc["release"]["name"] == "superfluid-toolchain" and doc["release"]["tarball"] is None
    assert "unanswered" not in doc
    basert, llamacpp, mlx = (doc["runtimes"][k] for k in ("basert", "llamacpp", "mlx"))
    assert basert["requires"] == {"header": "0.4.0", "abi": 1}
    assert basert["unnumbered_line"] == "0.3"
    assert [(i["version"], i["abi"]) for i in basert["installs"]] == [("0.4.0", 1), ("0.3.0", None)]
    assert [(t["build"], t["layout"]) for t in llamacpp["tested"]] == [("b11642", "v2"), ("b11284", "v1")]
    assert mlx["installs"] == [{"mlx": "0.32.2", "mlx_lm": "0.31.3", "python": "3.12"}]
    assert mlx["platforms"] == ["macos-arm64"]
    assert [o["name"] for o in llamacpp["options"]] == SPEC_LLAMA_OPTIONS
    assert [o["name"] for o in mlx["options"]] == ["venv", "prefill-chunk", "cache-limit-mb"]


def test_compat_human_has_a_table_per_runtime(home: Path) -> None:
    done = sf(base_env(home), "compat")
    assert done.code == 0, done.stderr
    out = done.stdout
    assert "basert: drives baseRT ABI 1 (header 0.4.0); unnumbered libraries of the 0.3 line too" in out
    assert "b11642  v2" in out and "b11284  v1" in out
    assert "0.32.2  0.31.3  3.12" in out


def test_versions_llamacpp_json(home: Path) -> None:
    receipt = home / "runtimes" / "llamacpp" / "b11284-cpu"
    receipt.mkdir(parents=True)
    (receipt / "runtime.json").write_text(json.dumps({"id": "llamacpp", "version": "b11284", "worker": "x"}))
    rows = sf_json(base_env(home), "runtime", "versions", "llamacpp", "--json")
    validate(rows, "versions")
    assert [(r["version"], r["installs"], r["install"], r["installed"]) for r in rows] == [
        ("b11642", True, "b11642-cpu", False), ("b11284", True, "b11284-cpu", True)]
    gpu_env = base_env(home, SUPERFLUID_HOST_NVIDIA_DRIVER="580.95.05")
    gpu = sf_json(gpu_env, "runtime", "versions", "llamacpp", "--json")
    assert gpu[0]["install"] == "b11642-cuda-13.4"


def test_versions_basert_json_lists_pins_with_verdicts(home: Path) -> None:
    rows = sf_json(base_env(home), "runtime", "versions", "basert", "--json")
    validate(rows, "versions")
    assert [(r["version"], r["abi"], r["tested"]) for r in rows] == [
        ("0.4.0", 1, True), ("0.3.0", None, True), ("0.2.6", None, False)]
    assert all(isinstance(r["installs"], str) and r["install"] is None for r in rows)  # Linux x64: none here
    assert rows[2]["verdict"] == "unnumbered 0.2.6, not of the 0.3 line; this superfluid drives ABI 1"
    mac = sf_json(base_env(home, **MACOS_ARM64), "runtime", "versions", "basert", "--json")
    assert [(r["installs"], r["install"]) for r in mac[:2]] == [(True, "0.4.0-metal"), (True, "0.3.0-metal")]


def test_versions_human_table(home: Path) -> None:
    done = sf(base_env(home), "runtime", "versions", "llamacpp")
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["VERSION", "INSTALLS", "HERE", "AS", "INSTALLED", "TESTED", "NOTE"]
    assert lines[1].split()[:5] == ["b11642", "yes", "b11642-cpu", "no", "yes"]


def test_options_llamacpp_json(home: Path) -> None:
    options = sf_json(base_env(home), "runtime", "options", "llamacpp", "--json")
    validate(options, "options")
    assert [o["name"] for o in options] == SPEC_LLAMA_OPTIONS
    by_name = {o["name"]: o for o in options}
    assert by_name["n-gpu-layers"]["type"] == "int" and by_name["n-gpu-layers"]["minimum"] == -1
    assert by_name["cache-type-k"]["type"] == "enum" and "q8_0" in by_name["cache-type-k"]["values"]
    assert by_name["tensor-split"]["type"] == "list" and by_name["tensor-split"]["items"] == "float"
    assert by_name["lib"]["type"] == "path"


def test_options_human_table(home: Path) -> None:
    done = sf(base_env(home), "runtime", "options", "mlx")
    assert done.code == 0, done.stderr
    assert "prefill-chunk   2048" in done.stdout and "an integer from 1 to 1048576" in done.stdout
    assert "--mlx-<option> <value>" in done.stdout


def test_runtimes_json(home: Path) -> None:
    rows = sf_json(base_env(home), "runtimes", "--json")
    validate(rows, "runtimes")
    by_id = {r["id"]: r for r in rows}
    assert list(by_id) == list(registry.IDS)
    assert by_id["basert"]["requires"] == {"header": "0.4.0", "abi": 1}
    assert by_id["basert"]["installable"] is None  # baseRT publishes no Linux x64 engine
    assert by_id["llamacpp"]["installable"] == "b11642-cpu"
    assert by_id["mlx"]["installable"] is None
    assert by_id["mlx"]["state"] == "not installed"
    assert by_id["mlx"]["ready"].startswith("MLX runs on Apple silicon only")
    assert [o["name"] for o in by_id["llamacpp"]["options"]] == SPEC_LLAMA_OPTIONS
    assert [o["name"] for o in by_id["basert"]["options"]] == ["kv-bits", "lib"]


def test_unknown_runtime_is_a_usage_error(home: Path) -> None:
    done = sf(base_env(home), "runtime", "versions", "nope", "--json")
    assert done.code == 2 and "no runtime 'nope'" in done.stderr and "Traceback" not in done.stderr
