"""``runtime/basert/config``: the ctypes mirror is the C layout of our header, field for field, and
the facts a check report carries are read from it."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest
from basert_helpers import compile_and_run

from superfluid.runtime.basert.config import CONFIG_SIZE, BaseRTModelConfig, architecture, facts


def test_every_field_offset_matches_the_c_layout(tmp_path: Path) -> None:
    fields = [name for name, _ in BaseRTModelConfig._fields_]
    lines = "\n".join(f'    printf("{f} %zu %zu\\n", offsetof(BaseRTModelConfig, {f}), '
                      f'sizeof(((BaseRTModelConfig *)0)->{f}));' for f in fields)
    out = compile_and_run(tmp_path, f"""
        #include <stddef.h>
        #include <stdio.h>
        #include "baseRT.h"
        int main(void) {{
            printf("sizeof %zu %zu\\n", sizeof(BaseRTModelConfig), _Alignof(BaseRTModelConfig));
        {lines}
            return 0;
        }}""")
    c_layout = {name: (int(a), int(b)) for name, a, b in (line.split() for line in out.splitlines())}
    assert c_layout.pop("sizeof") == (ctypes.sizeof(BaseRTModelConfig), ctypes.alignment(BaseRTModelConfig))
    py_layout = {name: (getattr(BaseRTModelConfig, name).offset, getattr(BaseRTModelConfig, name).size)
                 for name in fields}
    assert py_layout == c_layout
    assert len(fields) == 131 and ctypes.sizeof(BaseRTModelConfig) == 1792


# offsets the vendored Rust sys crate asserts for the 0.3 line (notes/basert.md §3.2)
KNOWN_OFFSETS = {
    "n_layers": 4, "norm_eps": 40, "rope_theta": 44, "sliding_window_pattern": 48, "sliding_window": 52,
    "rope_local_theta": 56, "architecture": 60, "enc_n_layers": 92, "enc_max_seq_len": 112,
    "swa_layers": 144, "ffn_dims": 208, "attn_output_gate": 1232, "linear_attn_layers": 1244,
    "gdn_num_k_heads": 1308, "ssm_state_size": 1328, "ssm_num_heads": 1344, "n_experts": 1348,
    "expert_weights_scale": 1368, "vision_n_layers": 1372, "vision_arch": 1432, "audio_n_layers": 1448,
    "eoa_token_id": 1524, "mrope_section": 1528, "mrope_interleaved": 1540, "rope_scaling_factor": 1544,
    "rope_orig_max_pos": 1556, "rope_scaling_type": 1560, "qk_scale_factor": 1564, "nope_layers": 1576,
    "embed_norm_eps": 1640, "vision_window_layers": 1644, "video_token_id": 1724, "q_lora_rank": 1728,
    "indexer_top_k": 1768, "rope_yarn_beta_fast": 1772,
}


@pytest.mark.parametrize(("field", "offset"), sorted(KNOWN_OFFSETS.items()))
def test_published_offsets(field: str, offset: int) -> None:
    assert getattr(BaseRTModelConfig, field).offset == offset


@pytest.mark.parametrize(("raw", "text"), [
    pytest.param(b"qwen3", "qwen3", id="plain"),
    pytest.param(b"", "", id="empty"),
    pytest.param(b"a" * 32, "a" * 32, id="all-32-bytes-no-nul"),
    pytest.param(b"llama\0junk", "llama", id="stops-at-the-first-nul"),
    pytest.param(b"\xffarch", "\ufffdarch", id="undecodable-replaced"),
])
def test_architecture_text(raw: bytes, text: str) -> None:
    config = BaseRTModelConfig()
    ctypes.memmove(ctypes.addressof(config) + BaseRTModelConfig.architecture.offset, raw, len(raw))
    assert architecture(config) == text


def test_the_size_is_the_headers() -> None:
    assert CONFIG_SIZE == ctypes.sizeof(BaseRTModelConfig) == 1792
    assert ctypes.alignment(BaseRTModelConfig) == 4


def test_facts_are_the_decoders_sizes_and_the_architecture() -> None:
    values: dict[str, Any] = {"vocab_size": 15, "n_layers": 2, "dim": 64, "n_heads": 4, "n_kv_heads": 2,
                              "head_dim": 16, "ffn_dim": 256, "max_seq_len": 128}
    config = BaseRTModelConfig(**values, architecture=b"ref", n_experts=8, enc_dim=7)
    got = facts(config)
    assert got == {"architecture": "ref", **values}  # the rest of the struct is not a fact
    assert list(got) == ["architecture", *values]  # in the report's order
    assert all(type(got[k]) is int for k in values)


def test_facts_of_an_empty_config() -> None:
    assert facts(BaseRTModelConfig()) == {"architecture": "", "vocab_size": 0, "n_layers": 0, "dim": 0,
                                          "n_heads": 0, "n_kv_heads": 0, "head_dim": 0, "ffn_dim": 0,
                                          "max_seq_len": 0}


