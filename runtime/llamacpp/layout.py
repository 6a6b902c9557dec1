"""The two layouts of llama.cpp's parameter structs, and telling them apart from their defaults.

See docs/runtimes.md, "Tested builds and the two layouts".
"""

from __future__ import annotations

import ctypes as C
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Layout",
    "LAYOUTS",
    "Mismatch",
    "LayoutUnknown",
    "ContextParamsV1",
    "ContextParamsV2",
    "ModelParams",
    "Batch",
    "DefaultsImage",
    "IMAGE_BYTES",
    "AbortCallback",
    "detect",
    "mismatches",
    "fill",
    "default_image",
]

#: ``bool (*ggml_abort_callback)(void * data)``
AbortCallback = C.CFUNCTYPE(C.c_bool, C.c_void_p)

# (name, ctypes type, default or None when the default is not part of the fingerprint)
_Field = tuple[str, Any, Any]

_CONTEXT_HEAD: list[_Field] = [
    ("n_ctx", C.c_uint32, 512),
    ("n_batch", C.c_uint32, 2048),
    ("n_ubatch", C.c_uint32, 512),
    ("n_seq_max", C.c_uint32, 1),
    ("n_rs_seq", C.c_uint32, 0),
    ("n_outputs_max", C.c_uint32, 0),
    ("n_outputs_max_per_seq", C.c_uint32, 1),
    ("n_threads", C.c_int32, 4),  # GGML_DEFAULT_N_THREADS
    ("n_threads_batch", C.c_int32, 4),
    ("ctx_type", C.c_int, 0),
    ("rope_scaling_type", C.c_int, -1),
    ("pooling_type", C.c_int, -1),
    ("attention_type", C.c_int, -1),
    ("flash_attn_type", C.c_int, -1),
    ("rope_freq_base", C.c_float, 0.0),
    ("rope_freq_scale", C.c_float, 0.0),
    ("yarn_ext_factor", C.c_float, -1.0),
    ("yarn_attn_factor", C.c_float, -1.0),
    ("yarn_beta_fast", C.c_float, -1.0),
    ("yarn_beta_slow", C.c_float, -1.0),
    ("yarn_orig_ctx", C.c_uint32, 0),
    ("defrag_thold", C.c_float, -1.0),
    ("cb_eval", C.c_void_p, 0),
    ("cb_eval_user_data", C.c_void_p, 0),
    ("type_k", C.c_int, 1),  # GGML_TYPE_F16
    ("type_v", C.c_int, 1),
]

# v2 inserts this one field here, between type_v and abort_callback
_MOE: list[_Field] = [("moe_cache_size", C.c_size_t, 0)]

_CONTEXT_TAIL: list[_Field] = [
    ("abort_callback", AbortCallback, 0),
    ("abort_callback_data", C.c_void_p, 0),
    ("embeddings", C.c_bool, False),
    ("offload_kqv", C.c_bool, True),
    ("no_perf", C.c_bool, True),
    ("op_offload", C.c_bool, True),
    ("swa_full", C.c_bool, True),
    ("kv_unified", C.c_bool, False),
    ("samplers", C.c_void_p, 0),
    ("n_samplers", C.c_size_t, 0),
    ("ctx_other", C.c_void_p, 0),
]

_MODEL: list[_Field] = [
    ("devices", C.c_void_p, 0),
    ("tensor_buft_overrides", C.c_void_p, 0),
    ("n_gpu_layers", C.c_int32, -1),
    ("split_mode", C.c_int, 1),  # LLAMA_SPLIT_MODE_LAYER
    ("load_mode", C.c_int, -1),  # AUTO
    ("lazy_mode", C.c_int, 1),  # AUTO
    ("main_gpu", C.c_int32, 0),
    ("tensor_split", C.POINTER(C.c_float), 0),
    ("progress_callback", C.c_void_p, 0),
    ("progress_callback_user_data", C.c_void_p, 0),
    ("kv_overrides", C.c_void_p, 0),
    ("vocab_only", C.c_bool, False),
    ("check_tensors", C.c_bool, False),
    ("use_extra_bufts", C.c_bool, True),
    ("no_host", C.c_bool, False),
    ("no_alloc", C.c_bool, False),
    ("load_mtp", C.c_bool, False),
]


def _struct(name: str, fields: Sequence[_Field]) -> type[C.Structure]:
    return type(name, (C.Structure,), {"_fields_": [(n, t) for n, t, _ in fields]})


_CONTEXT_V1 = tuple(_CONTEXT_HEAD + _CONTEXT_TAIL)
_CONTEXT_V2 = tuple(_CONTEXT_HEAD + _MOE + _CONTEXT_TAIL)

ContextParamsV1 = _struct("ContextParamsV1", _CONTEXT_V1)
ContextParamsV2 = _struct("ContextParamsV2", _CONTEXT_V2)
ModelParams = _struct("ModelParams", _MODEL)


class Batch(C.Structure):
    """``struct llama_batch`` (56 bytes; unchanged in both layouts)."""

    _fields_ = [
        ("n_tokens", C.c_int32),
        ("token", C.POINTER(C.c_int32)),
        ("embd", C.POINTER(C.c_float)),
        ("pos", C.POINTER(C.c_int32)),
        ("n_seq_id", C.POINTER(C.c_int32)),
        ("seq_id", C.POINTER(C.POINTER(C.c_int32))),
        ("logits", C.POINTER(C.c_int8)),
    ]


#: Bytes set aside for a defaults image: more than any layout we know (168) needs.
IMAGE_BYTES = 512


class DefaultsImage(C.Structure):
    """An oversized by-value return buffer for the two ``*_default_params()`` getters.

    Why a larger result type is safe: a struct of more than 16 bytes is returned through memory the
    *caller* allocates and passes as a hidden pointer (x86-64 System V: in ``rdi``; AArch64 AAPCS64,
    Apple's included: in ``x8``). ctypes allocates ``sizeof(restype)`` bytes for it and the callee
    writes exactly its own ``sizeof`` into it, so a 512-byte result buffer holds a 160- or 168-byte
    struct with room to spare, whatever the library's layout. A result type *smaller* than the
    library's struct would let the callee write past our buffer: that is why we never read the
    defaults through a layout's own struct before we know the layout. (A struct of 512 bytes is
    classified MEMORY on x86-64 and is not an HFA on AArch64, so both sides agree it goes through
    the hidden pointer.) The words are ``uint64`` so the buffer is 8-byte aligned like the real one.
    """

    _fields_ = [("words", C.c_uint64 * (IMAGE_BYTES // 8))]

    def data(self) -> bytes:
        return bytes(self)


@dataclass(kw_only=True, frozen=True, slots=True)
class Layout:
    """One generation of the parameter structs."""

    name: str  # "v1" | "v2"
    context: type[C.Structure]
    model: type[C.Structure]
    context_fields: tuple[_Field, ...]
    model_fields: tuple[_Field, ...]
    builds: tuple[str, ...]  # the builds known to have it, the tested one first

    @property
    def tested_build(self) -> str:
        return self.builds[0]


LAYOUTS: tuple[Layout, ...] = (
    Layout(name="v2", context=ContextParamsV2, model=ModelParams, context_fields=_CONTEXT_V2,
           model_fields=tuple(_MODEL), builds=("b11642", "b11549", "b11669", "b11739")),
    Layout(name="v1", context=ContextParamsV1, model=ModelParams, context_fields=_CONTEXT_V1,
           model_fields=tuple(_MODEL), builds=("b11284", "b11312", "b11434")),
)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A field whose bytes in the image are not the default a tested build returns."""

    struct: str  # "llama_context_params" | "llama_model_params"
    field: str
    offset: int
    found: Any
    expected: Any

    def describe(self) -> str:
        return f"{self.field} (at byte {self.offset}) defaults to {_show(self.found)} where a tested build's is " \
               f"{_show(self.expected)}"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


class LayoutUnknown(Exception):
    """The defaults fit no layout; ``closest`` is the layout they came nearest, with its mismatches."""

    def __init__(self, closest: Layout, found: list[Mismatch]) -> None:
        self.closest = closest
        self.mismatches = found
        shown = "; ".join(m.describe() for m in found[:4])
        more = f"; and {len(found) - 4} more" if len(found) > 4 else ""
        super().__init__(
            f"its parameter structs are laid out as no tested build's are ({shown}{more}, read as layout "
            f"{closest.name} of {closest.tested_build})"
        )


def _read(image: bytes, offset: int, ctype: Any) -> Any:
    size = C.sizeof(ctype)
    raw = image[offset : offset + size]
    if len(raw) < size:
        return None
    if ctype is C.c_float:
        return struct.unpack("<f" if _little() else ">f", raw)[0]
    if ctype is C.c_bool:
        return raw != b"\x00"
    signed = ctype in (C.c_int, C.c_int32)
    return int.from_bytes(raw, "little" if _little() else "big", signed=signed)


def _little() -> bool:
    return sys.byteorder == "little"


def _offsets(struct_type: type[C.Structure]) -> dict[str, int]:
    return {name: getattr(struct_type, name).offset for name, *_ in struct_type._fields_}


def _check(image: bytes, struct_type: type[C.Structure], fields: tuple[_Field, ...], label: str) -> list[Mismatch]:
    offsets = _offsets(struct_type)
    out = []
    for name, ctype, default in fields:
        if default is None:
            continue
        if isinstance(default, bool):
            # a bool is one byte that must be exactly 0 or 1
            byte = _read(image, offsets[name], C.c_uint8)
            found: Any = bool(byte) if byte in (0, 1) else byte
            ok = byte == int(default)
        else:
            found = _read(image, offsets[name], ctype)
            ok = found == default
        if not ok:
            out.append(Mismatch(label, name, offsets[name], found, default))
    return out


def mismatches(layout: Layout, context_image: bytes, model_image: bytes) -> list[Mismatch]:
    """Every field of ``layout`` whose default is not where and what that layout says it is."""
    return _check(context_image, layout.context, layout.context_fields, "llama_context_params") + _check(
        model_image, layout.model, layout.model_fields, "llama_model_params"
    )


def detect(context_image: bytes, model_image: bytes) -> Layout:
    """The layout whose defaults the two images hold, field by field.

    Args:
        context_image: the bytes ``llama_context_default_params()`` wrote (at least the struct's size).
        model_image: the bytes ``llama_model_default_params()`` wrote.

    Raises:
        LayoutUnknown: no layout fits; carries the closest one and the fields that did not match.
    """
    results = [(layout, mismatches(layout, context_image, model_image)) for layout in LAYOUTS]
    for layout, found in results:
        if not found:
            return layout
    closest, found = min(results, key=lambda r: len(r[1]))
    raise LayoutUnknown(closest, found)


def default_image(layout: Layout, size: int = IMAGE_BYTES) -> tuple[bytes, bytes]:
    """Synthetic (context, model) default images of ``layout``, as a tested build returns them.

    Padding and the bytes past the struct are zero. Used by tests and to document the fingerprint.
    """
    ctx = layout.context()
    fill(ctx, {n: d for n, _, d in layout.context_fields if d is not None and n != "abort_callback"})
    model = layout.model()
    fill(model, {n: d for n, _, d in layout.model_fields if d is not None and n != "tensor_split"})
    return bytes(ctx).ljust(size, b"\0"), bytes(model).ljust(size, b"\0")


def fill(params: C.Structure, values: Mapping[str, Any]) -> C.Structure:
    """Set named fields of either layout's struct with the same assignments; returns ``params``.

    A name the struct lacks is an error (a v1 struct has no ``moe_cache_size``).

    Raises:
        KeyError: ``params`` has no field of that name.
    """
    names = {name for name, *_ in params._fields_}
    for name, value in values.items():
        if name not in names:
            raise KeyError(f"{type(params).__name__} has no field {name!r}")
        setattr(params, name, value)
    return params
