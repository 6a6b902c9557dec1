"""Driving a loaded libllama: devices, a model, tokens, decoding, sampling and chat prompts."""

from __future__ import annotations

import ctypes as C
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from superfluid.runtime.kernel.errors import ModelLoadFailed, SuperfluidError
from superfluid.runtime.llamacpp.bindings import ChatMessage
from superfluid.runtime.llamacpp.layout import fill
from superfluid.runtime.llamacpp.loader import Library
from superfluid.runtime.llamacpp.options import FIELDS

__all__ = ["Device", "devices", "Model", "load_model", "Context", "DecodeFailed", "meta", "Sampler",
           "apply_chat_template", "ChatTemplateRefused", "apply", "tensor_split_array"]

_DEV_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}
#: llama_decode: 2 = aborted by the abort callback (llama.h)
DECODE_ABORTED = 2
#: LLAMA_DEFAULT_SEED: llama_sampler_init_dist draws a random seed for it (llama.h)
_RANDOM_SEED = 0xFFFFFFFF


def tensor_split_array(values: list[float]) -> Any:
    """A C ``float[]`` for ``tensor_split``; the caller keeps it alive while the model loads."""
    # llama.cpp reads llama_max_devices() entries (16 at most on the tested builds); pad with zeros
    padded = list(values) + [0.0] * max(0, 16 - len(values))
    return (C.c_float * len(padded))(*padded)


def apply(values: Mapping[str, Any], model: Any, context: Any) -> list[Any]:
    """Set the checked option ``values`` on the two structs (either layout); returns objects to keep alive.

    ``lib`` is not a struct field (the locator reads it); ``tensor-split`` becomes a C array.
    """
    keep: list[Any] = []
    model_values: dict[str, Any] = {}
    context_values: dict[str, Any] = {}
    for name, value in values.items():
        if name == "tensor-split":
            array = tensor_split_array(value)
            keep.append(array)
            model.tensor_split = array
            continue
        if name not in FIELDS:
            continue
        target, member, convert = FIELDS[name]
        (model_values if target == "model" else context_values)[member] = convert(value)
    fill(model, model_values)
    fill(context, context_values)
    return keep


class DecodeFailed(SuperfluidError):
    """``llama_decode`` returned a status other than 0."""

    def __init__(self, status: int, detail: str = "") -> None:
        why = {1: "no KV slot for the batch", DECODE_ABORTED: "aborted"}.get(status, "failed")
        super().__init__(f"llama_decode returned {status} ({why}){': ' + detail if detail else ''}")
        self.status = status


@dataclass(kw_only=True, frozen=True, slots=True)
class Device:
    """A device of ggml's backend registry."""

    index: int
    name: str
    description: str
    backend: str  # the registry's name: "CPU", "CUDA", "Metal", "Vulkan"...
    kind: str  # "cpu" | "gpu" | "igpu" | "accel"
    memory_free: int
    memory_total: int

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["memory"] = self.memory_total
        return out


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def devices(lib: Library) -> list[Device]:
    """The devices ggml's backend registry lists (the CPU included), with their memory."""
    fn = lib.fn
    out = []
    for i in range(fn["ggml_backend_dev_count"]()):
        dev = fn["ggml_backend_dev_get"](i)
        free, total = C.c_size_t(0), C.c_size_t(0)
        fn["ggml_backend_dev_memory"](dev, C.byref(free), C.byref(total))
        reg = fn["ggml_backend_dev_backend_reg"](dev)
        out.append(Device(
            index=i,
            name=_text(fn["ggml_backend_dev_name"](dev)),
            description=_text(fn["ggml_backend_dev_description"](dev)),
            backend=_text(fn["ggml_backend_reg_name"](reg)) if reg else "",
            kind=_DEV_TYPES.get(fn["ggml_backend_dev_type"](dev), "other"),
            memory_free=free.value,
            memory_total=total.value,
        ))
    return out


@dataclass
class Model:
    """A model loaded by the library; ``close()`` frees it."""

    lib: Library
    path: str
    handle: int
    vocab: int
    options: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        if self.handle:
            self.lib.fn["llama_model_free"](self.handle)
            self.handle = 0

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def facts(self) -> dict[str, Any]:
        """Architecture, trained context, vocabulary size, layers and weight bytes."""
        fn = self.lib.fn
        return {
            "architecture": meta(self, "general.architecture"),
            "name": meta(self, "general.name"),
            "trained_context": fn["llama_model_n_ctx_train"](self.handle),
            "n_vocab": fn["llama_vocab_n_tokens"](self.vocab),
            "n_layer": fn["llama_model_n_layer"](self.handle),
            "n_embd": fn["llama_model_n_embd"](self.handle),
            "n_params": fn["llama_model_n_params"](self.handle),
            "weight_bytes": fn["llama_model_size"](self.handle),
        }

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids of ``text`` (with BOS when the model adds one and ``add_special``)."""
        raw = text.encode("utf-8")
        fn = self.lib.fn["llama_tokenize"]
        cap = len(raw) + 8
        buf = (C.c_int32 * cap)()
        n = fn(self.vocab, raw, len(raw), buf, cap, add_special, parse_special)
        if n < 0:  # the negated number of tokens needed
            cap = -n
            buf = (C.c_int32 * cap)()
            n = fn(self.vocab, raw, len(raw), buf, cap, add_special, parse_special)
        if n < 0:
            raise SuperfluidError(f"llama_tokenize failed on {len(raw)} bytes of text ({n})")
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes of one token."""
        fn = self.lib.fn["llama_token_to_piece"]
        buf = C.create_string_buffer(64)
        n = fn(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = C.create_string_buffer(-n)
            n = fn(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[: max(n, 0)]

    def detokenize(self, tokens: list[int]) -> str:
        """The text of ``tokens`` (pieces joined as bytes, then decoded, so split characters survive)."""
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.fn["llama_vocab_is_eog"](self.vocab, token))

    def chat_template(self) -> str | None:
        """The model's default chat template (GGUF ``tokenizer.chat_template``), or None when it has none."""
        raw = self.lib.fn["llama_model_chat_template"](self.handle, None)
        return raw.decode("utf-8", "replace") if raw else None


class ChatTemplateRefused(SuperfluidError):
    """``llama_chat_apply_template`` does not know the template (it is not one of llama.cpp's built-in ones)."""


def apply_chat_template(lib: Library, template: str, messages: list[tuple[str, str]], *,
                        add_assistant: bool = True) -> str:
    """``messages`` (role, content) formatted by llama.cpp's ``llama_chat_apply_template`` with
    ``template``, ending with the opening of the assistant's turn when ``add_assistant``.

    Raises:
        ChatTemplateRefused: llama.cpp does not recognise the template.
    """
    encoded = [(role.encode("utf-8"), content.encode("utf-8")) for role, content in messages]
    chat = (ChatMessage * max(1, len(encoded)))(*(ChatMessage(r, c) for r, c in encoded))
    fn = lib.fn["llama_chat_apply_template"]
    tmpl = template.encode("utf-8")
    size = 2 * sum(len(r) + len(c) for r, c in encoded) + 256
    for _ in range(2):
        buf = C.create_string_buffer(size)
        n = int(fn(tmpl, chat, len(encoded), add_assistant, buf, size))
        if n < 0:
            raise ChatTemplateRefused("llama.cpp's llama_chat_apply_template does not know the model's chat "
                                      "template (it formats only its built-in templates)")
        if n <= size:
            return buf.raw[:n].decode("utf-8", "replace")
        size = n + 1  # the length it needs: once more with room for it
    raise ChatTemplateRefused(f"llama_chat_apply_template asked for {size} bytes twice")


@dataclass
class Sampler:
    """A llama.cpp sampler chain: top-k, then top-p, then temperature, then a draw seeded by ``seed``;
    or (``greedy``) the most likely token, chosen by llama.cpp's greedy sampler.

    ``sample(ctx, index)`` draws the next token from the logits of one decoded position (and the
    chain accepts it), so the same seed over the same logits draws the same tokens. The vocabulary
    is walked in C, never in Python (a 128k vocabulary costs a Python loop milliseconds a token).
    ``close()`` frees the chain.
    """

    lib: Library
    handle: int

    @classmethod
    def greedy(cls, lib: Library) -> Sampler:
        """A chain of llama.cpp's greedy sampler alone: the most likely token (the first of equals).

        Raises:
            SuperfluidError: llama.cpp made no sampler.
        """
        return cls._chain(lib, [lib.fn["llama_sampler_init_greedy"]()])

    @classmethod
    def _chain(cls, lib: Library, steps: list[int]) -> Sampler:
        fn = lib.fn
        chain = fn["llama_sampler_chain_init"](fn["llama_sampler_chain_default_params"]())
        if not chain:
            for step in steps:
                fn["llama_sampler_free"](step)
            raise SuperfluidError("llama_sampler_chain_init returned no sampler chain")
        for step in steps:
            fn["llama_sampler_chain_add"](chain, step)  # the chain owns it from here
        return cls(lib=lib, handle=chain)

    @classmethod
    def create(cls, lib: Library, *, temperature: float, top_p: float = 1.0, top_k: int = 0, seed: int) -> Sampler:
        """The chain for these settings (``top_k`` 0 and ``top_p`` 1 leave those steps out). Any
        integer seeds it: folded into 0 to 2**32 - 2, since 2**32 - 1 asks llama.cpp for a random seed.

        Raises:
            SuperfluidError: llama.cpp made no sampler.
        """
        fn = lib.fn
        steps = []
        if top_k > 0:
            steps.append(fn["llama_sampler_init_top_k"](top_k))
        if top_p < 1.0:
            steps.append(fn["llama_sampler_init_top_p"](top_p, 1))
        steps += [fn["llama_sampler_init_temp"](temperature), fn["llama_sampler_init_dist"](seed % _RANDOM_SEED)]
        return cls._chain(lib, steps)

    def sample(self, ctx: Context | int, index: int = -1) -> int:
        """The token drawn after position ``index`` of the last batch decoded in ``ctx`` (a
        ``Context`` or its handle; -1: the batch's last position with logits)."""
        handle = ctx.handle if isinstance(ctx, Context) else ctx
        return int(self.lib.fn["llama_sampler_sample"](self.handle, handle, index))

    def close(self) -> None:
        if self.handle:
            self.lib.fn["llama_sampler_free"](self.handle)
            self.handle = 0

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def meta(model: Model, key: str) -> str | None:
    """A GGUF metadata value as llama.cpp prints it (arrays as ``[a, b, ...]``), or None."""
    fn = model.lib.fn["llama_model_meta_val_str"]
    buf = C.create_string_buffer(256)
    n = fn(model.handle, key.encode(), buf, len(buf))
    if n < 0:
        return None
    if n >= len(buf):
        buf = C.create_string_buffer(n + 1)
        fn(model.handle, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def load_model(lib: Library, path: str, options: Mapping[str, Any] | None = None, *,
               fields: Mapping[str, Any] | None = None) -> Model:
    """Load the model at ``path`` with the checked options applied to ``llama_model_params``.

    Args:
        fields: raw ``llama_model_params`` fields to set besides the options (e.g. ``vocab_only``).

    Raises:
        ModelLoadFailed: llama.cpp could not load it (its last error lines are in the message).
    """
    options = dict(options or {})
    params = lib.model_params()
    keep = apply(options, params, lib.context_params())
    fill(params, dict(fields or {}))
    lib.log.errors.clear()
    handle = lib.fn["llama_model_load_from_file"](path.encode(), params)
    del keep
    if not handle:
        raise ModelLoadFailed(f"{path}: llama.cpp could not load the model ({lib.log.last() or 'no reason logged'})")
    vocab = lib.fn["llama_model_get_vocab"](handle)
    return Model(lib=lib, path=path, handle=handle, vocab=vocab, options=options)


@dataclass
class Context:
    """A llama_context over a model; ``close()`` frees it."""

    model: Model
    handle: int
    keep: list[Any] = field(default_factory=list)  # callbacks and arrays the library points at
    pos: int = 0

    @classmethod
    def create(cls, model: Model, *, n_ctx: int = 0, options: Mapping[str, Any] | None = None,
               fields: Mapping[str, Any] | None = None) -> Context:
        """A context with the options applied to the library's own ``llama_context_params``.

        Args:
            n_ctx: the context size (0: the model's trained context).
            fields: raw ``llama_context_params`` fields to set besides the options (``embeddings``,
                ``abort_callback``...). Callbacks given here are kept alive by the context.

        Raises:
            ModelLoadFailed: llama.cpp could not create the context.
        """
        lib = model.lib
        params = lib.context_params()
        keep = apply(dict(options if options is not None else model.options), lib.model_params(), params)
        values = {"n_ctx": n_ctx, **dict(fields or {})}
        keep += [v for v in values.values() if isinstance(v, C._CFuncPtr)]  # type: ignore[attr-defined]
        fill(params, values)
        lib.log.errors.clear()
        handle = lib.fn["llama_init_from_model"](model.handle, params)
        if not handle:
            raise ModelLoadFailed(
                f"{model.path}: llama.cpp could not create a context ({lib.log.last() or 'no reason logged'})"
            )
        return cls(model=model, handle=handle, keep=keep)

    def close(self) -> None:
        if self.handle:
            self.model.lib.fn["llama_free"](self.handle)
            self.handle = 0

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def n_ctx(self) -> int:
        return int(self.model.lib.fn["llama_n_ctx"](self.handle))

    def decode(self, tokens: list[int]) -> int:
        """Decode ``tokens`` as the next positions of sequence 0; llama_decode's status (0 = done)."""
        fn = self.model.lib.fn
        arr = (C.c_int32 * len(tokens))(*tokens)
        batch = fn["llama_batch_get_one"](arr, len(tokens))
        status = int(fn["llama_decode"](self.handle, batch))
        if status == 0:
            self.pos += len(tokens)
        return status

    def embedding(self) -> list[float] | None:
        """The last position's embedding, or None when the context computes none."""
        lib = self.model.lib
        ptr = lib.fn["llama_get_embeddings_ith"](self.handle, -1)
        if not ptr:
            return None
        n = lib.fn["llama_model_n_embd"](self.model.handle)
        return list((C.c_float * n).from_address(C.addressof(ptr.contents)))

    def generate(self, prompt: list[int], max_tokens: int) -> list[int]:
        """Greedy decoding: up to ``max_tokens`` new ids after ``prompt``, ending at an end-of-generation token.

        Raises:
            DecodeFailed: llama_decode returned a non-zero status (e.g. 2 when aborted).
        """
        status = self.decode(prompt)
        if status != 0:
            raise DecodeFailed(status, self.model.lib.log.last())
        out: list[int] = []
        with Sampler.greedy(self.model.lib) as greedy:
            while len(out) < max_tokens:
                token = greedy.sample(self)
                out.append(token)
                if self.model.is_eog(token):
                    break
                status = self.decode([token])
                if status != 0:
                    raise DecodeFailed(status, self.model.lib.log.last())
        return out

