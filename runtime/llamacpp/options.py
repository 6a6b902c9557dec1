"""The options llama.cpp takes on serve, and where each lands in the parameter structs.

See docs/runtimes.md, "Options (`--llamacpp-<name>` on serve, `--<name>` to the worker)".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from superfluid.runtime.kernel.options import Option

__all__ = ["OPTIONS", "FIELDS", "CACHE_TYPES", "STATE_OPTIONS", "PARALLEL", "MAX_SEQUENCES", "UINT32_MAX", "INT32_MAX"]

#: the largest value of the C fields the integer options land in: an ``int32_t`` and a ``uint32_t``
#: (each option's declared range is its field's at most: a larger value would wrap in the struct)
INT32_MAX = (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1

# ggml_type ids of the KV cache types llama.cpp accepts (ggml.h `enum ggml_type`); the loader checks
# each against the library's own ggml_type_name before using it.
CACHE_TYPES: dict[str, int] = {
    "f32": 0, "f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2, "q4_1": 3, "iq4_nl": 20, "q5_0": 6, "q5_1": 7,
}
#: sequences decoded together by default (llama-server's ``-np auto`` gives 4 slots)
PARALLEL = 4
#: the most sequences one llama_context holds (llama.cpp's LLAMA_MAX_SEQ)
MAX_SEQUENCES = 256
_SPLIT = {"none": 0, "layer": 1, "row": 2, "tensor": 3}
_LOAD = {"auto": -1, "none": 0, "mmap": 1, "mlock": 2, "mmap-mlock": 3, "direct-io": 4}
_LAZY = {"off": 0, "auto": 1, "on": 2}
_FLASH = {"auto": -1, "off": 0, "on": 1}
_ROPE = {"none": 0, "linear": 1, "yarn": 2, "longrope": 3}

OPTIONS: tuple[Option, ...] = (
    Option(name="n-gpu-layers", kind="int", description="layers to offload to the GPU (-1: all)", default=-1,
           minimum=-1, maximum=INT32_MAX),
    Option(name="main-gpu", kind="int", description="the GPU used when split-mode is none", default=0, minimum=0,
           maximum=INT32_MAX),
    Option(name="split-mode", kind="enum", description="how to split the model across GPUs", default="layer",
           values=tuple(_SPLIT)),
    Option(name="tensor-split", kind="list", description="proportion of the model per GPU, e.g. 3,1", item="float"),
    Option(name="load-mode", kind="enum", description="how to load the weights", default="auto", values=tuple(_LOAD)),
    Option(name="lazy-mode", kind="enum", description="on-demand reading of large tensors", default="auto",
           values=tuple(_LAZY)),
    Option(name="repack", kind="bool", description="repack weights into faster CPU layouts (extra buffer types)",
           default=True),
    Option(name="parallel", kind="int", description="requests decoded together in one step (continuous batching), "
                                                    "each holding --max-context tokens", default=PARALLEL, minimum=1,
           maximum=MAX_SEQUENCES),
    Option(name="threads", kind="int", description="threads for generation", default=4, minimum=1, maximum=1024),
    Option(name="threads-batch", kind="int", description="threads for prompt processing", default=4, minimum=1,
           maximum=1024),
    Option(name="batch-size", kind="int", description="logical batch size", default=2048, minimum=1,
           maximum=UINT32_MAX),
    Option(name="ubatch-size", kind="int", description="physical batch size", default=512, minimum=1,
           maximum=UINT32_MAX),
    Option(name="flash-attn", kind="enum", description="Flash Attention", default="auto", values=tuple(_FLASH)),
    Option(name="cache-type-k", kind="enum", description="KV cache type of K", default="f16",
           values=tuple(CACHE_TYPES)),
    Option(name="cache-type-v", kind="enum", description="KV cache type of V", default="f16",
           values=tuple(CACHE_TYPES)),
    Option(name="kv-offload", kind="bool", description="keep the KV cache on the GPU", default=True),
    Option(name="op-offload", kind="bool", description="offload host tensor operations to the device", default=True),
    Option(name="swa-full", kind="bool", description="a full-size cache for sliding-window attention", default=True),
    Option(name="rope-scaling", kind="enum", description="RoPE scaling type (default: the model's)",
           values=tuple(_ROPE)),
    Option(name="rope-freq-base", kind="float", description="RoPE base frequency (default: the model's)", minimum=0),
    Option(name="rope-freq-scale", kind="float", description="RoPE frequency scaling factor (default: the model's)",
           minimum=0),
    Option(name="yarn-ext-factor", kind="float", description="YaRN extrapolation mix factor (default: the model's)"),
    Option(name="yarn-attn-factor", kind="float", description="YaRN magnitude scaling factor"),
    Option(name="yarn-beta-fast", kind="float", description="YaRN low correction dimension"),
    Option(name="yarn-beta-slow", kind="float", description="YaRN high correction dimension"),
    Option(name="yarn-orig-ctx", kind="int", description="YaRN original context size", minimum=0,
           maximum=UINT32_MAX),
    Option(name="lib", kind="path", description="the libllama to load (a file, or a directory holding it)"),
)

_Convert = Callable[[Any], Any]


def _enum(table: Mapping[str, int]) -> _Convert:
    return lambda v: table[v]


def _same(v: Any) -> Any:
    return v


# option -> (struct: "model" | "context", field, value converter)
FIELDS: dict[str, tuple[str, str, _Convert]] = {
    "n-gpu-layers": ("model", "n_gpu_layers", _same),
    "main-gpu": ("model", "main_gpu", _same),
    "split-mode": ("model", "split_mode", _enum(_SPLIT)),
    "load-mode": ("model", "load_mode", _enum(_LOAD)),
    "lazy-mode": ("model", "lazy_mode", _enum(_LAZY)),
    "repack": ("model", "use_extra_bufts", bool),
    "parallel": ("context", "n_seq_max", _same),
    "threads": ("context", "n_threads", _same),
    "threads-batch": ("context", "n_threads_batch", _same),
    "batch-size": ("context", "n_batch", _same),
    "ubatch-size": ("context", "n_ubatch", _same),
    "flash-attn": ("context", "flash_attn_type", _enum(_FLASH)),
    "cache-type-k": ("context", "type_k", _enum(CACHE_TYPES)),
    "cache-type-v": ("context", "type_v", _enum(CACHE_TYPES)),
    "kv-offload": ("context", "offload_kqv", bool),
    "op-offload": ("context", "op_offload", bool),
    "swa-full": ("context", "swa_full", bool),
    "rope-scaling": ("context", "rope_scaling_type", _enum(_ROPE)),
    "rope-freq-base": ("context", "rope_freq_base", float),
    "rope-freq-scale": ("context", "rope_freq_scale", float),
    "yarn-ext-factor": ("context", "yarn_ext_factor", float),
    "yarn-attn-factor": ("context", "yarn_attn_factor", float),
    "yarn-beta-fast": ("context", "yarn_beta_fast", float),
    "yarn-beta-slow": ("context", "yarn_beta_slow", float),
    "yarn-orig-ctx": ("context", "yarn_orig_ctx", _same),
}

#: options that change what a KV cell means, folded into the state identity when set
STATE_OPTIONS = (
    "rope-scaling", "rope-freq-base", "rope-freq-scale", "yarn-ext-factor", "yarn-attn-factor",
    "yarn-beta-fast", "yarn-beta-slow", "yarn-orig-ctx", "cache-type-k", "cache-type-v",
)
