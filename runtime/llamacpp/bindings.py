"""The C functions the llama.cpp adapter calls, in one table: name, argument types, result type."""

from __future__ import annotations

import ctypes as C
from typing import Any

from superfluid.runtime.llamacpp.layout import Batch, DefaultsImage, Layout

__all__ = ["FUNCTIONS", "OPTIONAL", "REQUIRED", "LogCallback", "CONTEXT", "MODEL", "SamplerChainParams", "ChatMessage",
           "missing", "bind", "bind_defaults"]

CONTEXT = "CONTEXT"  # marker: the layout's llama_context_params
MODEL = "MODEL"  # marker: llama_model_params

#: ``void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data)``
LogCallback = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)


class SamplerChainParams(C.Structure):
    """``struct llama_sampler_chain_params { bool no_perf; }`` (returned and passed by value)."""

    _fields_ = [("no_perf", C.c_bool)]


class ChatMessage(C.Structure):
    """``struct llama_chat_message { const char * role; const char * content; }``."""

    _fields_ = [("role", C.c_char_p), ("content", C.c_char_p)]


_p = C.c_void_p
_i32 = C.c_int32
_i32p = C.POINTER(C.c_int32)
_fp = C.POINTER(C.c_float)
_sz = C.c_size_t

# name: (argtypes, restype)
FUNCTIONS: dict[str, tuple[list[Any], Any]] = {
    # lifecycle and defaults
    "llama_backend_init": ([], None),
    "llama_backend_free": ([], None),
    "llama_log_set": ([LogCallback, _p], None),
    "llama_context_default_params": ([], CONTEXT),
    "llama_model_default_params": ([], MODEL),
    "llama_print_system_info": ([], C.c_char_p),
    # model
    "llama_model_load_from_file": ([C.c_char_p, MODEL], _p),
    "llama_model_free": ([_p], None),
    "llama_model_get_vocab": ([_p], _p),
    "llama_model_n_ctx_train": ([_p], _i32),
    "llama_model_n_embd": ([_p], _i32),
    "llama_model_n_layer": ([_p], _i32),
    "llama_model_n_head": ([_p], _i32),
    "llama_model_n_head_kv": ([_p], _i32),
    "llama_model_size": ([_p], C.c_uint64),
    "llama_model_n_params": ([_p], C.c_uint64),
    "llama_model_meta_val_str": ([_p, C.c_char_p, C.c_char_p, _sz], _i32),
    "llama_model_desc": ([_p, C.c_char_p, _sz], _i32),
    # context and decoding
    "llama_init_from_model": ([_p, CONTEXT], _p),
    "llama_free": ([_p], None),
    "llama_n_ctx": ([_p], C.c_uint32),
    "llama_n_ctx_seq": ([_p], C.c_uint32),
    "llama_n_batch": ([_p], C.c_uint32),
    "llama_n_seq_max": ([_p], C.c_uint32),
    "llama_batch_get_one": ([_i32p, _i32], Batch),
    "llama_decode": ([_p, Batch], _i32),
    "llama_get_logits_ith": ([_p, _i32], _fp),
    "llama_get_embeddings_ith": ([_p, _i32], _fp),
    # the KV cache of a context's sequences (llama_memory_*: both layouts' builds; older builds'
    # llama_kv_self_* are gone from them)
    "llama_get_memory": ([_p], _p),
    "llama_memory_seq_rm": ([_p, _i32, _i32, _i32], C.c_bool),
    "llama_memory_seq_pos_max": ([_p, _i32], _i32),
    # vocabulary
    "llama_vocab_n_tokens": ([_p], _i32),
    "llama_vocab_eos": ([_p], _i32),
    "llama_vocab_is_eog": ([_p, _i32], C.c_bool),
    "llama_tokenize": ([_p, C.c_char_p, _i32, _i32p, _i32, C.c_bool, C.c_bool], _i32),
    "llama_token_to_piece": ([_p, _i32, C.c_char_p, _i32, _i32, C.c_bool], _i32),
    # sampling: a chain of llama.cpp's own samplers (top-k, top-p, temperature, seeded draw; greedy)
    "llama_sampler_chain_default_params": ([], SamplerChainParams),
    "llama_sampler_chain_init": ([SamplerChainParams], _p),
    "llama_sampler_chain_add": ([_p, _p], None),
    "llama_sampler_init_top_k": ([_i32], _p),
    "llama_sampler_init_top_p": ([C.c_float, _sz], _p),
    "llama_sampler_init_temp": ([C.c_float], _p),
    "llama_sampler_init_dist": ([C.c_uint32], _p),
    "llama_sampler_init_greedy": ([], _p),
    "llama_sampler_sample": ([_p, _p, _i32], _i32),
    "llama_sampler_free": ([_p], None),
    # chat: the model's template and llama.cpp's own formatter of it
    "llama_model_chat_template": ([_p, C.c_char_p], C.c_char_p),
    "llama_chat_apply_template": ([C.c_char_p, C.POINTER(ChatMessage), _sz, C.c_bool, C.c_char_p, _i32], _i32),
    # ggml: types and the backend registry
    "ggml_row_size": ([C.c_int, C.c_int64], _sz),
    "ggml_blck_size": ([C.c_int], C.c_int64),
    "ggml_type_size": ([C.c_int], _sz),
    "ggml_type_name": ([C.c_int], C.c_char_p),
    "ggml_backend_dev_count": ([], _sz),
    "ggml_backend_dev_get": ([_sz], _p),
    "ggml_backend_dev_name": ([_p], C.c_char_p),
    "ggml_backend_dev_description": ([_p], C.c_char_p),
    "ggml_backend_dev_memory": ([_p, C.POINTER(_sz), C.POINTER(_sz)], None),
    "ggml_backend_dev_type": ([_p], C.c_int),
    "ggml_backend_dev_backend_reg": ([_p], _p),
    "ggml_backend_reg_name": ([_p], C.c_char_p),
    # optional: a build may lack them and still be driven
    "llama_version": ([], C.c_char_p),
    "ggml_backend_load_all_from_path": ([C.c_char_p], None),
    "ggml_backend_load": ([C.c_char_p], _p),
}

#: functions a build may lack
OPTIONAL = frozenset({"llama_version", "ggml_backend_load_all_from_path", "ggml_backend_load"})
REQUIRED = tuple(name for name in FUNCTIONS if name not in OPTIONAL)


def missing(lib: C.CDLL) -> list[str]:
    """The required functions ``lib`` does not export (no function is called)."""
    out = []
    for name in REQUIRED:
        try:
            getattr(lib, name)
        except AttributeError:
            out.append(name)
    return out


def _resolve(t: Any, layout: Layout) -> Any:
    if t == CONTEXT:
        return layout.context
    if t == MODEL:
        return layout.model
    return t


def bind(lib: C.CDLL, layout: Layout) -> dict[str, Any]:
    """Every function of the table, typed for ``layout``; optional ones absent are left out."""
    out: dict[str, Any] = {}
    for name, (argtypes, restype) in FUNCTIONS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name in OPTIONAL:
                continue
            raise
        fn.argtypes = [_resolve(a, layout) for a in argtypes]
        fn.restype = _resolve(restype, layout)
        out[name] = fn
    return out


def bind_defaults(lib: C.CDLL) -> tuple[Any, Any]:
    """The two default-params getters, returning into an oversized ``DefaultsImage`` each.

    These are separate function objects from the ones ``bind`` types (ctypes caches one object per
    attribute access through ``getattr``; we take fresh ones from the library's ``_FuncPtr``).
    """
    getters = []
    for name in ("llama_context_default_params", "llama_model_default_params"):
        fn = lib._FuncPtr((name, lib))
        fn.argtypes = []
        fn.restype = DefaultsImage
        getters.append(fn)
    return getters[0], getters[1]
