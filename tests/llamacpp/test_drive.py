"""``runtime/llamacpp/drive``: what a decode status and a device say, as tables; checked option values
landing in the named fields of either layout's structs (``apply``); then a real libllama
(each layout, in a fresh process: two builds never share one) driving a real tiny model: tokens round
trip, metadata found or None, llama.cpp's own chat formatter and its refusal, a decode of nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.options import check_options
from superfluid.runtime.llamacpp import layout as L
from superfluid.runtime.llamacpp.drive import DECODE_ABORTED, DecodeFailed, Device, apply
from superfluid.runtime.llamacpp.options import OPTIONS
from tests.conftest import ROOT


@pytest.mark.parametrize(("status", "detail", "message"), [
    pytest.param(1, "", "llama_decode returned 1 (no KV slot for the batch)", id="no-kv-slot"),
    pytest.param(DECODE_ABORTED, "", "llama_decode returned 2 (aborted)", id="aborted"),
    pytest.param(-1, "", "llama_decode returned -1 (failed)", id="negative"),
    pytest.param(3, "batch of 9", "llama_decode returned 3 (failed): batch of 9", id="with-detail"),
])
def test_decode_failed(status: int, detail: str, message: str) -> None:
    e = DecodeFailed(status, detail)
    assert (e.status, e.message) == (status, message)


def test_a_device_as_json_names_its_total_memory() -> None:
    d = Device(index=0, name="CPU", description="the host", backend="CPU", kind="cpu", memory_free=1, memory_total=2)
    assert d.to_json() == {"index": 0, "name": "CPU", "description": "the host", "backend": "CPU", "kind": "cpu",
                           "memory_free": 1, "memory_total": 2, "memory": 2}


@pytest.mark.parametrize("layout", L.LAYOUTS, ids=lambda x: x.name)
def test_checked_values_land_in_the_named_fields_of_either_layout(layout: L.Layout) -> None:
    values = check_options(OPTIONS, [("n-gpu-layers", "0"), ("split-mode", "none"), ("repack", "false"),
                                     ("threads", "3"), ("cache-type-k", "q8_0"), ("flash-attn", "on"),
                                     ("kv-offload", "no"), ("rope-freq-base", "20000"),
                                     ("tensor-split", "3,1")])
    model, context = layout.model(), layout.context()
    keep = apply(values, model, context)
    assert (model.n_gpu_layers, model.split_mode, model.use_extra_bufts) == (0, 0, False)
    assert list(model.tensor_split[:3]) == [3.0, 1.0, 0.0] and keep
    assert (context.n_threads, context.type_k, context.flash_attn_type) == (3, 8, 1)
    assert (context.offload_kqv, context.rope_freq_base) == (False, 20000.0)


_CHILD = textwrap.dedent("""
    import json, sys
    from superfluid.runtime.llamacpp import drive, loader
    lib = loader.load(sys.argv[1])
    out = {}
    with drive.load_model(lib, sys.argv[2]) as m, drive.Context.create(m, n_ctx=64) as ctx:
        tokens = m.tokenize("hello world", add_special=False)
        out["tokens"] = len(tokens)
        out["round_trip"] = m.detokenize(tokens)
        out["arch"] = drive.meta(m, "general.architecture")
        out["absent"] = drive.meta(m, "superfluid.no.such.key")
        out["nothing"] = ctx.generate(m.tokenize("hello"), 0)
        out["n_ctx"] = ctx.n_ctx
        out["chatml"] = drive.apply_chat_template(lib, "chatml", [("user", "hi")])
        out["no_assistant"] = drive.apply_chat_template(lib, "chatml", [("user", "hi")], add_assistant=False)
        try:
            drive.apply_chat_template(lib, "not a template llama.cpp knows {{ x }}", [("user", "hi")])
            out["refused"] = None
        except drive.ChatTemplateRefused as e:
            out["refused"] = type(e).__name__
        out["devices"] = [d.kind for d in drive.devices(lib)]
    try:
        drive.load_model(lib, sys.argv[3])
        out["broken"] = None
    except Exception as e:
        out["broken"] = type(e).__name__
    print(json.dumps(out))
""")


def _drive(lib: Path, model: Path, broken: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(lib / "libllama.so"), str(model), str(broken)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_real_model_driven(libllama_each: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)
    got = _drive(libllama_each, gguf_models["always-the.gguf"], broken)
    assert got["tokens"] > 0 and got["round_trip"].strip() == "hello world"
    assert got["arch"] and got["absent"] is None
    assert got["nothing"] == [] and got["n_ctx"] >= 64
    assert got["chatml"].startswith("<|im_start|>user\nhi<|im_end|>")
    assert got["chatml"].endswith("<|im_start|>assistant\n")
    assert not got["no_assistant"].endswith("<|im_start|>assistant\n")
    assert got["refused"] == "ChatTemplateRefused"
    assert "cpu" in got["devices"]
    assert got["broken"] == "ModelLoadFailed"
