"""The one table of baseRT functions we bind: (name, argtypes, restype), as in ``include/baseRT.h``."""

from __future__ import annotations

import ctypes
from typing import Any

from superfluid.runtime.basert.config import BaseRTModelConfig

__all__ = ["Binding", "BOUND", "OPTIONAL", "ABI_VERSION", "GET_CONFIG", "GET_CONFIG_INTO", "bind"]

Binding = tuple[str, tuple[Any, ...], Any]

_model = ctypes.c_void_p
_tokens = ctypes.POINTER(ctypes.c_uint32)

ABI_VERSION = "baseRT_abi_version"
GET_CONFIG = "baseRT_get_config"
GET_CONFIG_INTO = "baseRT_get_config_into"

BOUND: tuple[Binding, ...] = (
    ("baseRT_version_string", (), ctypes.c_char_p),
    ("baseRT_model_config_sizeof", (), ctypes.c_size_t),
    # by value: called only after baseRT_model_config_sizeof() equals sizeof(BaseRTModelConfig)
    (GET_CONFIG, (_model,), BaseRTModelConfig),
    ("baseRT_load_model", (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int), _model),
    ("baseRT_free_model", (_model,), None),
    ("baseRT_device_memory_budget", (), ctypes.c_size_t),
    ("baseRT_get_error", (), ctypes.c_char_p),
    ("baseRT_get_error_code", (), ctypes.c_int),
    ("baseRT_strerror", (ctypes.c_int,), ctypes.c_char_p),
    ("baseRT_encode", (_model, ctypes.c_char_p, _tokens, ctypes.c_int), ctypes.c_int),
    ("baseRT_decode_token", (_model, ctypes.c_uint32), ctypes.c_char_p),
    ("baseRT_bos_id", (_model,), ctypes.c_uint32),
    ("baseRT_eos_token_id", (_model,), ctypes.c_uint32),
    ("baseRT_prefill", (_model, _tokens, ctypes.c_int), ctypes.c_uint32),
    ("baseRT_decode_step", (_model, ctypes.c_uint32, ctypes.c_int), ctypes.c_uint32),
)

OPTIONAL: tuple[Binding, ...] = (
    (ABI_VERSION, (), ctypes.c_uint),
    (GET_CONFIG_INTO, (_model, ctypes.c_void_p, ctypes.c_size_t), ctypes.c_size_t),
)


def bind(cdll: ctypes.CDLL, binding: Binding) -> Any | None:
    """The typed function ``binding`` names in ``cdll``, or None when the library lacks it.

    Only looks the symbol up (``dlsym``); never calls it.
    """
    name, argtypes, restype = binding
    try:
        fn = getattr(cdll, name)
    except AttributeError:
        return None
    fn.argtypes = list(argtypes)
    fn.restype = restype
    return fn
