"""What a model costs and what state may be kept: KV bytes per token, the state identity, the budget.

See docs/runtimes.md, "Sizing and state".
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.llamacpp.drive import Device, Model, meta
from superfluid.runtime.llamacpp.options import CACHE_TYPES, STATE_OPTIONS

if TYPE_CHECKING:
    from superfluid.runtime.llamacpp.loader import Library

__all__ = [
    "LayerWidths",
    "SizingRefused",
    "layer_widths",
    "kv_bytes_per_token",
    "weights_digest",
    "state_identity",
    "Budget",
    "export_budget",
    "resolve_device",
    "HOST_LIMIT",
    "HEADROOM",
]

GiB = 1 << 30
#: state kept in host memory never exceeds this
HOST_LIMIT = 8 * GiB
#: memory left free on an accelerator for the runtime's own work
HEADROOM = 1 * GiB


class SizingRefused(ValueError):
    """The model cannot be priced under the chosen cache types (the message says why). ``option``
    names the option at fault (``cache-type-k``) when one is: llama.cpp then refuses to make a
    context with it, so the model does not serve with it either."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class LayerWidths(NamedTuple):
    """One layer's K and V head sizes and KV head count (0 heads: a layer with no KV cache)."""

    head_k: int
    head_v: int
    n_head_kv: int

    @property
    def k(self) -> int:
        return self.head_k * self.n_head_kv

    @property
    def v(self) -> int:
        return self.head_v * self.n_head_kv


def _ints(text: str | None) -> list[int] | None:
    """A metadata value as a list of ints: ``"4"`` -> [4], ``"[4, 4, 0]"`` -> [4, 4, 0]."""
    if text is None:
        return None
    try:  # the model's metadata: untrusted, read within limits
        value = loads(text, max_bytes=1 << 16, max_depth=2)
    except UntrustedJson:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def layer_widths(model: Model) -> list[LayerWidths]:
    """Per-layer KV widths from the model's metadata (``<arch>.attention.*``) and llama.cpp's counts.

    ``head_count_kv`` may be one number or one per layer; key/value lengths default to
    ``n_embd / n_head`` as in llama.cpp.

    Raises:
        SizingRefused: the metadata lacks the head counts.
    """
    fn = model.lib.fn
    arch = meta(model, "general.architecture") or ""
    n_layer = int(fn["llama_model_n_layer"](model.handle))
    n_embd = int(fn["llama_model_n_embd"](model.handle))
    heads = _ints(meta(model, f"{arch}.attention.head_count"))
    if not heads:
        raise SizingRefused(f"the model's metadata has no {arch}.attention.head_count")
    heads_kv = _ints(meta(model, f"{arch}.attention.head_count_kv")) or heads
    heads = heads * n_layer if len(heads) == 1 else heads
    heads_kv = heads_kv * n_layer if len(heads_kv) == 1 else heads_kv
    key_len = _ints(meta(model, f"{arch}.attention.key_length"))
    value_len = _ints(meta(model, f"{arch}.attention.value_length"))
    out = []
    for i in range(n_layer):
        default = n_embd // heads[i] if heads[i] else 0
        out.append(LayerWidths(key_len[0] if key_len else default, value_len[0] if value_len else default,
                               heads_kv[i]))
    return out


def _type_id(lib: Library, name: str, which: str) -> int:
    type_id = CACHE_TYPES[name]
    reported = lib.fn["ggml_type_name"](type_id)
    if (reported or b"").decode() != name:
        raise SizingRefused(f"this llama.cpp numbers its ggml types differently: type {type_id} is "
                            f"{reported!r}, not {name}", option=f"cache-type-{which}")
    return type_id


def _row(lib: Library, type_id: int, name: str, width: int, head: int, which: str) -> int:
    if width == 0:
        return 0
    block = int(lib.fn["ggml_blck_size"](type_id))
    # llama.cpp refuses a cache type whose block does not divide the head size (and ggml_row_size
    # would abort the process on a width it does not divide): refuse before calling it
    if head % block or width % block:
        raise SizingRefused(f"cache-type-{which} {name} packs {block} values a block, which does not divide "
                            f"this model's {which.upper()} head size {head}", option=f"cache-type-{which}")
    return int(lib.fn["ggml_row_size"](type_id, width))


def kv_bytes_per_token(lib: Library, widths: Sequence[LayerWidths], cache_type_k: str = "f16",
                       cache_type_v: str = "f16") -> int:
    """Bytes one token's K and V take over all layers, priced by the library's ``ggml_row_size``.

    Raises:
        SizingRefused: a cache type the library numbers differently, or whose block does not
            divide the model's head size.
    """
    tk, tv = _type_id(lib, cache_type_k, "k"), _type_id(lib, cache_type_v, "v")
    total = 0
    for w in widths:
        total += _row(lib, tk, cache_type_k, w.k, w.head_k, "k") + _row(lib, tv, cache_type_v, w.v, w.head_v, "v")
    return total


_digests: dict[tuple[str, int, int], str] = {}


def weights_digest(path: str) -> str:
    """The sha256 of the model file (hex), remembered per process while size and mtime are unchanged.

    Raises:
        OSError: the file cannot be read.
    """
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _digests[key] = h.hexdigest()
    return _digests[key]


def state_identity(weights: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The key state is stored under: the weights alone, or the weights with the settings that change
    what a KV cell means, when any is set.

    A cache type set to f16 (the default) counts as unset. Returns ``{"key", "weights", "settings"}``.
    """
    settings = {}
    for name in STATE_OPTIONS:
        if name not in options or options[name] is None:
            continue
        value = options[name]
        if name.startswith("cache-type-") and value == "f16":
            continue
        settings[name] = value
    if not settings:
        key = weights
    else:
        canon = json.dumps({"weights": weights, "settings": settings}, sort_keys=True, separators=(",", ":"))
        key = hashlib.sha256(canon.encode()).hexdigest()
    return {"key": key, "weights": weights, "settings": settings}


class Budget(NamedTuple):
    """Bytes of state that may be kept beyond the pool, and why that many."""

    bytes: int
    why: str


def resolve_device(devices: Sequence[Device], options: Mapping[str, Any]) -> Device | None:
    """The device the model's layers land on: None for the CPU (no accelerator, or none offloaded).

    ``n-gpu-layers 0`` keeps the model on the CPU; otherwise the ``main-gpu``-th accelerator when the
    split mode is none, else the first.
    """
    if options.get("n-gpu-layers", -1) == 0:
        return None
    accelerators = [d for d in devices if d.kind in ("gpu", "igpu", "accel")]
    if not accelerators:
        return None
    if options.get("split-mode") == "none":
        index = int(options.get("main-gpu", 0))
        if index < len(accelerators):
            return accelerators[index]
    return accelerators[0]


def export_budget(device: Device | None, *, host_memory: int | None, headroom: int = HEADROOM,
                  limit: int = HOST_LIMIT) -> Budget:
    """How much state may be kept beyond the pool, decided by the device the loader resolved.

    - no accelerator (``device`` None or a CPU device): host memory, within ``limit`` (8 GiB);
    - an accelerator: its free memory less ``headroom``; one reporting no free memory (or less than
      the headroom) grants nothing, and the reason names the headroom.
    """
    if device is None or device.kind == "cpu":
        memory = host_memory if host_memory else (device.memory_total if device else 0)
        if not memory:
            return Budget(0, "host memory is unknown; no state is kept beyond the pool")
        granted = min(memory, limit)
        return Budget(granted, f"host memory ({memory} bytes), within {limit} bytes")
    if device.memory_free <= 0:
        return Budget(0, f"{device.name} reports no free memory; no state is kept beyond the pool "
                         f"(it would keep {headroom} bytes of headroom)")
    if device.memory_free <= headroom:
        return Budget(0, f"{device.name} has {device.memory_free} bytes free, within the {headroom} bytes of "
                         f"headroom kept for the runtime; no state is kept beyond the pool")
    return Budget(device.memory_free - headroom,
                  f"{device.name}: {device.memory_free} bytes free less {headroom} bytes of headroom")
