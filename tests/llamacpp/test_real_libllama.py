"""Against real libllama builds: v1 (llama.cpp b11312, 160-byte context params) and v2 (b11549, 168).

Each scenario runs in a child process (``tests/llamacpp/scenarios.py``), so a crash in native code
fails the test instead of killing pytest, and the two builds never share a process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.native


def run(scenario: str, lib: Path, **kwargs: Any) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "SUPERFLUID_LLAMA_LOG"}
    args = [sys.executable, "-m", "tests.llamacpp.scenarios", scenario, str(lib / "libllama.so")]
    args += [f"{k}={v}" for k, v in kwargs.items()]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{scenario} exited {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- detection -------------------------------------------------------------------------------------

def test_v1_library_is_detected_as_v1(libllama_v1: Path) -> None:
    out = run("detect", libllama_v1)
    assert out["layout"] == "v1"
    assert out["context_sizeof"] == 160
    assert out["version"] == "llama.cpp 0.5.0-dev"  # llama_version() of b11312; no receipt beside it


def test_v2_library_is_detected_as_v2(libllama_v2: Path) -> None:
    out = run("detect", libllama_v2)
    assert out["layout"] == "v2"
    assert out["context_sizeof"] == 168
    defaults = bytes.fromhex(out["context_defaults"])
    assert defaults[136:142] == b"\x00\x01\x01\x01\x01\x00"  # the bool block where v2 puts it


def test_devices_come_from_ggmls_registry(libllama_each: Path) -> None:
    devices = run("detect", libllama_each)["devices"]
    cpu = [d for d in devices if d["kind"] == "cpu"]
    assert cpu and cpu[0]["backend"] == "CPU" and cpu[0]["memory_total"] > 0


# --- generation ------------------------------------------------------------------------------------

def test_deterministic_model_generates_exactly_the_expected_tokens(libllama_each: Path, gguf_models: dict[str, Path],
                                                                  the_token: int) -> None:
    out = run("generate", libllama_each, model=gguf_models["always-the.gguf"], prompt="hello world the cat", n=6)
    # BOS, then whole-word pieces: the SPM merges reach every word of the tiny vocabulary
    assert out["prompt"] == [1, 312, 317, 292, 296]
    assert out["generated"] == [the_token] * 6
    assert out["text"] == " the" * 6


def test_generation_stops_at_end_of_generation(libllama_each: Path, gguf_models: dict[str, Path]) -> None:
    out = run("generate", libllama_each, model=gguf_models["always-eos.gguf"], n=6)
    assert out["generated"] == [2]  # </s>, and greedy decoding stops there


def test_a_quantized_k_cache_set_through_the_options_still_generates(libllama_each: Path, gguf_models: dict[str, Path],
                                                                     the_token: int) -> None:
    out = run("generate", libllama_each, model=gguf_models["hd32-always-the.gguf"], n=3, cache_type_k="q8_0")
    assert out["generated"] == [the_token] * 3


def test_the_random_model_decodes_through_both_layouts(libllama_each: Path, gguf_models: dict[str, Path]) -> None:
    out = run("generate", libllama_each, model=gguf_models["tiny-f16.gguf"], n=4)
    assert len(out["generated"]) == 4 and all(0 <= t < 322 for t in out["generated"])
    assert out["n_ctx"] >= 128


# --- fields after moe_cache_size reach the library -------------------------------------------------

def test_embeddings_and_abort_callback_set_through_our_struct_reach_the_library(
        libllama_each: Path, gguf_models: dict[str, Path]) -> None:
    out = run("fields", libllama_each, model=gguf_models["always-the.gguf"])
    assert out["embeddings_decode"] == 0 and out["embedding"] == 64  # the flag was read: n_embd floats
    assert out["plain_decode"] == 0 and out["plain_embedding"] is False
    assert out["abort_decode"] == 2 and out["abort_calls"] >= 1  # llama_decode's "aborted"
    assert out["false_abort_decode"] == 0 and out["false_abort_calls"] >= 1


# --- sizing ----------------------------------------------------------------------------------------

# ggml block sizes: f16 1 value in 2 bytes; q8_0 32 values in 34 bytes (fp16 scale + 32 int8);
# q4_0 32 values in 18 bytes (fp16 scale + 16 bytes of nibbles).
def _kv(layers: int, width: int, k: tuple[int, int], v: tuple[int, int]) -> int:
    (kb, ks), (vb, vs) = k, v
    return layers * (width // kb * ks + width // vb * vs)


F16, Q8_0, Q4_0 = (1, 2), (32, 34), (32, 18)


def test_kv_sizing_f16_matches_ggml_block_sizes(libllama_v1: Path, gguf_models: dict[str, Path]) -> None:
    out = run("size", libllama_v1, model=gguf_models["hd32-always-the.gguf"])
    # 2 layers; head dim 128/4 = 32; 2 KV heads: K and V rows of 64 values
    assert out["widths"] == [[32, 32, 2], [32, 32, 2]]
    assert out["kv_bytes_per_token"] == _kv(2, 64, F16, F16) == 512


def test_kv_sizing_q8_0_q4_0_matches_ggml_block_sizes(libllama_v1: Path, gguf_models: dict[str, Path]) -> None:
    out = run("size", libllama_v1, model=gguf_models["hd32-always-the.gguf"], k="q8_0", v="q4_0")
    assert out["kv_bytes_per_token"] == _kv(2, 64, Q8_0, Q4_0) == 208


def test_small_model_f16_sizing_and_quantized_refusal(libllama_v2: Path, gguf_models: dict[str, Path]) -> None:
    out = run("size", libllama_v2, model=gguf_models["tiny-f32.gguf"])
    assert out["kv_bytes_per_token"] == _kv(2, 32, F16, F16) == 256
    assert out["facts"]["weight_bytes"] > 0 and out["facts"]["trained_context"] == 256
    refused = run("size", libllama_v2, model=gguf_models["tiny-f32.gguf"], k="q8_0")
    assert "does not divide this model's K head size 16" in refused["kv_bytes_per_token"]


def test_a_broken_model_is_a_load_failure_with_llamas_reason(libllama_v1: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    out = run("badmodel", libllama_v1, model=bad)
    assert out["error"] == "ModelLoadFailed"
    assert str(bad) in out["message"] and "could not load" in out["message"]
