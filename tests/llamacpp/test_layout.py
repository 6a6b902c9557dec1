"""The two layouts: pinned offsets, and detection on synthetic default images (no library needed).

The tables below are the ones measured in C against each build's ``llama.h``
(notes/llamacpp.md §4 for b11312, §7.5 for b11549). ``test_offsets_match_offsetof_*`` compiles
``offsetof`` against the headers of the vendored sources the build script installed.
"""

from __future__ import annotations

import ctypes as C
import shutil
import subprocess
from pathlib import Path

import pytest

from superfluid.runtime.llamacpp import layout as L
from tests.llamacpp.stubs import older_defaults, older_layout

V1_CONTEXT = {
    "n_ctx": 0, "n_batch": 4, "n_ubatch": 8, "n_seq_max": 12, "n_rs_seq": 16, "n_outputs_max": 20,
    "n_outputs_max_per_seq": 24, "n_threads": 28, "n_threads_batch": 32, "ctx_type": 36,
    "rope_scaling_type": 40, "pooling_type": 44, "attention_type": 48, "flash_attn_type": 52,
    "rope_freq_base": 56, "rope_freq_scale": 60, "yarn_ext_factor": 64, "yarn_attn_factor": 68,
    "yarn_beta_fast": 72, "yarn_beta_slow": 76, "yarn_orig_ctx": 80, "defrag_thold": 84, "cb_eval": 88,
    "cb_eval_user_data": 96, "type_k": 104, "type_v": 108, "abort_callback": 112, "abort_callback_data": 120,
    "embeddings": 128, "offload_kqv": 129, "no_perf": 130, "op_offload": 131, "swa_full": 132,
    "kv_unified": 133, "samplers": 136, "n_samplers": 144, "ctx_other": 152,
}
V2_CONTEXT = {
    **{k: v for k, v in V1_CONTEXT.items() if v <= 108},
    "moe_cache_size": 112, "abort_callback": 120, "abort_callback_data": 128, "embeddings": 136,
    "offload_kqv": 137, "no_perf": 138, "op_offload": 139, "swa_full": 140, "kv_unified": 141,
    "samplers": 144, "n_samplers": 152, "ctx_other": 160,
}
MODEL = {
    "devices": 0, "tensor_buft_overrides": 8, "n_gpu_layers": 16, "split_mode": 20, "load_mode": 24,
    "lazy_mode": 28, "main_gpu": 32, "tensor_split": 40, "progress_callback": 48,
    "progress_callback_user_data": 56, "kv_overrides": 64, "vocab_only": 72, "check_tensors": 73,
    "use_extra_bufts": 74, "no_host": 75, "no_alloc": 76, "load_mtp": 77,
}
BATCH = {"n_tokens": 0, "token": 8, "embd": 16, "pos": 24, "n_seq_id": 32, "seq_id": 40, "logits": 48}

V1, V2 = (next(x for x in L.LAYOUTS if x.name == n) for n in ("v1", "v2"))


def offsets(struct: type[C.Structure]) -> dict[str, int]:
    return {name: getattr(struct, name).offset for name, *_ in struct._fields_}


# --- pinned offsets --------------------------------------------------------------------------------

@pytest.mark.parametrize(("struct", "table", "size"), [
    (L.ContextParamsV1, V1_CONTEXT, 160),
    (L.ContextParamsV2, V2_CONTEXT, 168),
    (L.ModelParams, MODEL, 80),
    (L.Batch, BATCH, 56),
], ids=["context-v1", "context-v2", "model", "batch"])
def test_every_offset_is_the_measured_one(struct: type[C.Structure], table: dict[str, int], size: int) -> None:
    assert offsets(struct) == table
    assert C.sizeof(struct) == size


def test_the_defaults_image_buffer_is_larger_than_any_layout() -> None:
    assert C.sizeof(L.DefaultsImage) == L.IMAGE_BYTES >= 2 * C.sizeof(L.ContextParamsV2)
    assert C.alignment(L.DefaultsImage) == 8


_OFFSETOF_C = """
#include <stddef.h>
#include <stdio.h>
#include "llama.h"
#define F(S, f) printf(#S " " #f " %zu\\n", offsetof(struct S, f));
int main(void) {
%s
    printf("llama_context_params sizeof %%zu\\n", sizeof(struct llama_context_params));
    printf("llama_model_params sizeof %%zu\\n", sizeof(struct llama_model_params));
    printf("llama_batch sizeof %%zu\\n", sizeof(struct llama_batch));
    return 0;
}
"""


def compiled_offsets(include: Path, tmp: Path, context: dict[str, int]) -> dict[tuple[str, str], int]:
    lines = [f"    F(llama_context_params, {f})" for f in context]
    lines += [f"    F(llama_model_params, {f})" for f in MODEL] + [f"    F(llama_batch, {f})" for f in BATCH]
    src = tmp / "offsets.c"
    src.write_text(_OFFSETOF_C.replace("%s", "\n".join(lines)).replace("%%", "%"))
    exe = tmp / "offsets"
    subprocess.run(["cc", "-std=c11", f"-I{include}", str(src), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {(s, f): int(n) for s, f, n in (line.split() for line in out.splitlines())}


@pytest.mark.native
@pytest.mark.parametrize("name", ["v1", "v2"])
def test_offsets_match_offsetof_on_the_builds_own_llama_h(name: str, request: pytest.FixtureRequest,
                                                          tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to compile offsetof against llama.h")
    lib_dir: Path = request.getfixturevalue(f"libllama_{name}")
    layout = V1 if name == "v1" else V2
    table = V1_CONTEXT if name == "v1" else V2_CONTEXT
    got = compiled_offsets(lib_dir / "include", tmp_path, table)
    assert {f: got[("llama_context_params", f)] for f in table} == offsets(layout.context) == table
    assert {f: got[("llama_model_params", f)] for f in MODEL} == offsets(layout.model) == MODEL
    assert {f: got[("llama_batch", f)] for f in BATCH} == offsets(L.Batch) == BATCH
    assert got[("llama_context_params", "sizeof")] == C.sizeof(layout.context)
    assert got[("llama_model_params", "sizeof")] == C.sizeof(L.ModelParams)
    assert got[("llama_batch", "sizeof")] == C.sizeof(L.Batch)


# --- detection on synthetic images -----------------------------------------------------------------

def test_a_v1_image_reads_as_v1() -> None:
    assert L.detect(*L.default_image(V1)).name == "v1"


def test_the_same_image_with_the_inserted_field_reads_as_v2() -> None:
    ctx, model = L.default_image(V1)
    with_moe = ctx[:112] + (0).to_bytes(8, "little") + ctx[112:160]  # size_t moe_cache_size = 0 after type_v
    assert with_moe[:168] == L.default_image(V2)[0][:168]
    assert L.detect(with_moe.ljust(L.IMAGE_BYTES, b"\0"), model).name == "v2"


def test_an_older_layout_of_the_same_size_reads_as_neither() -> None:
    assert C.sizeof(older_layout()) == 160  # same sizeof as v1: size alone cannot tell them apart
    with pytest.raises(L.LayoutUnknown) as caught:
        L.detect(older_defaults().ljust(L.IMAGE_BYTES, b"\0"), L.default_image(V1)[1])
    found = {m.field: (m.offset, m.found, m.expected) for m in caught.value.mismatches}
    # n_threads (4) now sits where v1 has n_outputs_max_per_seq (1)
    assert found["n_outputs_max_per_seq"] == (24, 4, 1)
    message = str(caught.value)
    assert "laid out as no tested build's are" in message
    assert "n_outputs_max_per_seq (at byte 24) defaults to 4 where a tested build's is 1" in message


def test_a_2024_layout_with_seed_first_reads_as_neither() -> None:
    image = bytearray(L.IMAGE_BYTES)
    image[0:4] = (0xFFFFFFFF).to_bytes(4, "little")  # uint32_t seed = LLAMA_DEFAULT_SEED
    image[4:8] = (512).to_bytes(4, "little")  # n_ctx at 4
    with pytest.raises(L.LayoutUnknown) as caught:
        L.detect(bytes(image), L.default_image(V1)[1])
    assert caught.value.mismatches[0].field == "n_ctx"
    assert caught.value.mismatches[0].found == 0xFFFFFFFF


def test_changed_model_params_defaults_are_refused_too() -> None:
    ctx, model = L.default_image(V1)
    broken = bytearray(model)
    broken[74] = 0  # use_extra_bufts
    with pytest.raises(L.LayoutUnknown) as caught:
        L.detect(ctx, bytes(broken))
    assert [(m.struct, m.field) for m in caught.value.mismatches] == [("llama_model_params", "use_extra_bufts")]


def test_a_non_boolean_byte_in_a_bool_field_is_a_mismatch() -> None:
    ctx, model = L.default_image(V1)
    broken = bytearray(ctx)
    broken[129] = 0xAB  # offload_kqv: neither 0 nor 1
    with pytest.raises(L.LayoutUnknown) as caught:
        L.detect(bytes(broken), model)
    assert [(m.field, m.found) for m in caught.value.mismatches] == [("offload_kqv", 0xAB)]


def test_reading_a_v1_image_as_v2_misplaces_exactly_the_fields_after_type_v() -> None:
    # every field of a v1 struct holds distinct non-zero bytes (bools: 1, nothing else is 1);
    # read the same bytes as v2 and compare each field's bytes where each layout puts it
    v1 = L.ContextParamsV1()
    raw = bytearray(bytes(v1))
    fields = [(n, getattr(L.ContextParamsV1, n)) for n, _ in L.ContextParamsV1._fields_]
    for i, (_name, desc) in enumerate(fields):
        raw[desc.offset:desc.offset + desc.size] = b"\x01" if desc.size == 1 else bytes(
            [0x10 + i] * desc.size)
    as_v2 = bytes(L.ContextParamsV2.from_buffer_copy(bytes(raw).ljust(168, b"\0")))
    moved = []
    for name, desc in fields:
        there = getattr(L.ContextParamsV2, name)
        if as_v2[there.offset:there.offset + there.size] != raw[desc.offset:desc.offset + desc.size]:
            moved.append(name)
    names = [n for n, _ in fields]
    after_type_v = names[names.index("type_v") + 1:]
    assert moved == after_type_v
    assert after_type_v[:3] == ["abort_callback", "abort_callback_data", "embeddings"]
    assert {"offload_kqv", "kv_unified", "samplers", "n_samplers", "ctx_other"} <= set(after_type_v)


def test_reading_the_v1_defaults_as_v2_is_refused_by_the_fields_the_defaults_expose() -> None:
    found = [m.field for m in L.mismatches(V2, *L.default_image(V1))]
    # the zero defaults of abort_callback/moe_cache_size/embeddings mask each other; the bools do not
    assert "offload_kqv" in found and "abort_callback_data" in found
    assert all(f in {n for n, *_ in V2.context_fields[26:]} for f in found)


# --- fill ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [V1, V2], ids=["v1", "v2"])
def test_the_same_assignments_fill_either_layout(layout: L.Layout) -> None:
    params = layout.context.from_buffer_copy(L.default_image(layout)[0][: C.sizeof(layout.context)])
    L.fill(params, {"n_ctx": 4096, "embeddings": True, "type_k": 8, "n_threads": 2})
    raw = bytes(params)
    at = offsets(layout.context)
    assert int.from_bytes(raw[0:4], "little") == 4096
    assert raw[at["embeddings"]] == 1 and raw[at["offload_kqv"]] == 1
    assert int.from_bytes(raw[at["type_k"]:at["type_k"] + 4], "little") == 8
    assert int.from_bytes(raw[at["n_threads"]:at["n_threads"] + 4], "little") == 2


def test_fill_refuses_a_field_the_layout_lacks() -> None:
    with pytest.raises(KeyError, match="moe_cache_size"):
        L.fill(L.ContextParamsV1(), {"moe_cache_size": 1})
