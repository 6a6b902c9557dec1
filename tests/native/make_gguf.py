#!/usr/bin/env python3
"""Write tiny llama-architecture GGUF models with the ``gguf`` package (notes/llamacpp.md §3).

Two kinds, both with a 322-token SPM ("llama") vocabulary in which every prefix of a few words is
a piece, so llama.cpp's bigram merges reach whole words (``vocab=N`` pads it to N tokens with word
pieces no merge reaches, ``▁w0``, ``▁w1``..., so that a vocabulary of real size costs what it costs):

- random: small random weights (what it generates is not asserted across llama.cpp builds);
  ``words_only`` zeroes the output rows of the control and byte tokens, so greedy text never ends
  (EOS's logit is 0, below the largest of the random ones) and is always whole words;
- deterministic (``always=<token text>``): attention and FFN weights are zero, so the residual is
  the identity; every embedding carries 1.0 in dim 0 and only the chosen token's output row reads
  dim 0, so greedy decoding always yields that token.

The writer is deterministic: the same arguments give the same bytes.

Usage: ``make_gguf.py [OUT_DIR]`` writes the standard set (see ``STANDARD``) into
``OUT_DIR`` (default ``$SUPERFLUID_NATIVE_CACHE/gguf``) unless already there, and prints the paths.
``make_gguf.py --bench NAME`` writes one of the serving benchmark's models (see ``BENCH``) into
``$SUPERFLUID_NATIVE_CACHE/gguf/bench`` unless already there.
``make_gguf.py --out FILE [--always TEXT] [--f16] [--vocab N] [...]`` writes one model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Bump when the generator's output changes, so cached files are rewritten.
GENERATOR_REVISION = 1

WORDS = ["▁the", "▁a", "▁cat", "▁dog", "▁sat", "▁on", "▁mat", "▁hello", "▁world", "▁is", "▁and"]


@dataclass(frozen=True)
class TinyModel:
    """The shape of a tiny model; ``always`` makes it deterministic."""

    layers: int = 2
    dim: int = 64
    ff: int = 128
    heads: int = 4
    kv_heads: int = 2
    ctx: int = 256
    f16: bool = False
    always: str | None = None
    seed: int = 0
    name: str = "tiny-llama"
    extra: dict[str, object] = field(default_factory=dict)
    chat_template: str | None = None  # tokenizer.chat_template, when the model carries one
    vocab: int | None = None  # tokens in the vocabulary (None: the base vocabulary's 322)
    words_only: bool = False  # random weights: greedy never picks a control or byte token


#: the special and byte tokens that open the vocabulary (``<unk> <s> </s>``, then 256 bytes)
N_SPECIAL = 3 + 256


def vocabulary(size: int | None = None) -> list[str]:
    """The token texts, in id order: ``<unk> <s> </s>``, 256 byte tokens, then word pieces; ``size``
    pads the word pieces with ``▁w0``, ``▁w1``... up to ``size`` tokens.

    Raises:
        ValueError: ``size`` is smaller than the base vocabulary.
    """
    words = ["▁", ".", ",", "!", "?"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    for wd in WORDS:
        for k in range(2, len(wd) + 1):
            if wd[:k] not in words:
                words.append(wd[:k])
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + words
    if size is not None:
        if size < len(tokens):
            raise ValueError(f"a vocabulary of {size} tokens is smaller than the base one ({len(tokens)})")
        # "▁w" is no token, so no merge of a prompt's pieces reaches these
        tokens += [f"▁w{i}" for i in range(size - len(tokens))]
    return tokens


def token_id(text: str) -> int:
    """The id of a token text in ``vocabulary()``.

    Raises:
        ValueError: the text is not a token of the tiny vocabulary.
    """
    return vocabulary().index(text)


def write(out: Path, model: TinyModel) -> Path:
    """Write ``model`` to ``out`` (atomically: a temporary file beside it, then a rename)."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(model.seed)
    tokens = vocabulary(model.vocab)
    n_words = len(tokens) - N_SPECIAL
    scores = [0.0] * N_SPECIAL + [float(len(t)) for t in tokens[N_SPECIAL:]]  # longer pieces win merges
    tt = gguf.TokenType
    types = [tt.UNKNOWN, tt.CONTROL, tt.CONTROL] + [tt.BYTE] * 256 + [tt.NORMAL] * n_words
    n_vocab = len(tokens)
    head_dim = model.dim // model.heads
    kv_dim = head_dim * model.kv_heads

    tmp = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(model.name)
    w.add_context_length(model.ctx)
    w.add_embedding_length(model.dim)
    w.add_block_count(model.layers)
    w.add_feed_forward_length(model.ff)
    w.add_head_count(model.heads)
    w.add_head_count_kv(model.kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if model.f16 else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if model.chat_template is not None:
        w.add_chat_template(model.chat_template)

    wt = np.float16 if model.f16 else np.float32
    det = model.always is not None

    def mat(rows: int, cols: int) -> np.ndarray:  # numpy shape (out, in) == ggml ne [in, out]
        if det:
            return np.zeros((rows, cols), dtype=wt)
        return (rng.standard_normal((rows, cols)) * 0.02).astype(wt)

    def norm(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)  # norms stay F32

    emb = (rng.standard_normal((n_vocab, model.dim)) * 0.02).astype(wt)
    if det:
        emb[:, 0] = 1.0
    w.add_tensor("token_embd.weight", emb)
    for i in range(model.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(model.dim))
        w.add_tensor(p + "attn_q.weight", mat(model.dim, model.dim))
        w.add_tensor(p + "attn_k.weight", mat(kv_dim, model.dim))
        w.add_tensor(p + "attn_v.weight", mat(kv_dim, model.dim))
        w.add_tensor(p + "attn_output.weight", mat(model.dim, model.dim))
        w.add_tensor(p + "ffn_norm.weight", norm(model.dim))
        w.add_tensor(p + "ffn_gate.weight", mat(model.ff, model.dim))
        w.add_tensor(p + "ffn_up.weight", mat(model.ff, model.dim))
        w.add_tensor(p + "ffn_down.weight", mat(model.dim, model.ff))
    w.add_tensor("output_norm.weight", norm(model.dim))
    if det:
        outw = np.zeros((n_vocab, model.dim), dtype=wt)
        outw[token_id(model.always), 0] = 10.0
    else:
        outw = mat(n_vocab, model.dim)
        if model.words_only:
            outw[:N_SPECIAL] = 0
    w.add_tensor("output.weight", outw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)
    return out


#: a ChatML chat template (as Qwen's and others' GGUFs carry it)
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# The set the tests use: file name -> model.
STANDARD: dict[str, TinyModel] = {
    "tiny-f32.gguf": TinyModel(),
    "tiny-f16.gguf": TinyModel(f16=True),
    "always-the.gguf": TinyModel(always="▁the", name="tiny-always-the"),
    "always-eos.gguf": TinyModel(always="</s>", name="tiny-always-eos"),
    # carries a ChatML template, which llama.cpp's llama_chat_apply_template knows
    "chat-always-the.gguf": TinyModel(always="▁the", name="tiny-chat-always-the", chat_template=CHATML),
    # head dim 32, so quantized KV cache types (32-value blocks) fit its rows
    "hd32-always-the.gguf": TinyModel(dim=128, ff=256, always="▁the", name="tiny-hd32-always-the"),
}


#: the serving benchmark's models (``benchmarks/bench_serve.py``, issue 45): random weights, greedy
#: text that never ends; the issue's size (12 layers, dim 768, f16), and the same with a vocabulary of
#: real size (Llama 3's 128,256 tokens), where any per-token cost over the vocabulary shows
BENCH: dict[str, TinyModel] = {
    "bench-12x768-f16.gguf": TinyModel(layers=12, dim=768, ff=2048, heads=12, kv_heads=4, ctx=4096, f16=True,
                                       name="bench-12x768", words_only=True),
    "bench-12x768-vocab128k-f16.gguf": TinyModel(layers=12, dim=768, ff=2048, heads=12, kv_heads=4, ctx=4096,
                                                 f16=True, name="bench-12x768-vocab128k", vocab=128256,
                                                 words_only=True),
}


def default_dir() -> Path:
    """``$SUPERFLUID_NATIVE_CACHE/gguf`` (default ``<checkout>/.cache/native/gguf``)."""
    env = os.environ.get("SUPERFLUID_NATIVE_CACHE")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / ".cache" / "native"
    return root / "gguf"


def write_standard(directory: Path | None = None) -> dict[str, Path]:
    """Write the standard set into ``directory`` unless this generator revision already did."""
    directory = directory or default_dir()
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / "generator.txt"
    current = stamp.exists() and stamp.read_text().strip() == str(GENERATOR_REVISION)
    paths = {}
    for name, model in STANDARD.items():
        path = directory / name
        if not (current and path.exists()):
            write(path, model)
        paths[name] = path
    stamp.write_text(f"{GENERATOR_REVISION}\n")
    return paths


def write_cached(path: Path, model: TinyModel) -> Path:
    """Write ``model`` to ``path`` unless the file there was written from the same model by this
    generator revision (``<path>.json`` beside it says which)."""
    stamp = path.with_name(path.name + ".json")
    wanted = {"generator": GENERATOR_REVISION, "model": asdict(model)}
    try:
        current = json.loads(stamp.read_text()) == wanted and path.exists()
    except (OSError, ValueError):
        current = False
    if not current:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, model)
        stamp.write_text(json.dumps(wanted, indent=2, ensure_ascii=False) + "\n")
    return path


def write_bench(name: str, directory: Path | None = None) -> Path:
    """The benchmark's model ``name`` (a key of ``BENCH``), in ``directory`` (default
    ``$SUPERFLUID_NATIVE_CACHE/gguf/bench``), written unless already there."""
    return write_cached((directory or default_dir() / "bench") / name, BENCH[name])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", type=Path, help="write the standard set here")
    ap.add_argument("--out", type=Path, help="write one model to this file")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--f16", action="store_true")
    ap.add_argument("--always", help="token text the model always predicts, e.g. '▁the' or '</s>'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, help="tokens in the vocabulary (default: the base vocabulary's)")
    ap.add_argument("--words-only", action="store_true", help="greedy never picks a control or byte token")
    ap.add_argument("--bench", choices=sorted(BENCH), help="write this benchmark model into the cache")
    a = ap.parse_args(argv)
    if a.bench:
        print(write_bench(a.bench))
        return 0
    if a.out:
        if a.vocab is not None and a.vocab < len(vocabulary()):
            ap.error(f"--vocab: at least {len(vocabulary())} (the base vocabulary)")
        model = TinyModel(a.layers, a.dim, a.ff, a.heads, a.kv_heads, a.ctx, a.f16, a.always, a.seed,
                          vocab=a.vocab, words_only=a.words_only)
        print(write(a.out, model))
        return 0
    for path in write_standard(a.dir).values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
