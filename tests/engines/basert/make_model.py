"""Write a tiny deterministic model in the reference engine's ``.base`` format (see engine.c).

The model is a word vocabulary and a next-token table: greedy generation from any word of
``SENTENCE`` continues the sentence to its end, then emits the end token. Usable as a script
(``python make_model.py OUT [--sentence TEXT] [--max-seq-len N]``) and as a module (``write_model``).
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

__all__ = ["SENTENCE", "ARCHITECTURE", "DIM", "N_LAYERS", "N_HEADS", "MAX_SEQ_LEN", "model_bytes", "write_model"]

# Every word appears once, so a bigram table continues the sentence deterministically.
SENTENCE = "once upon a time the tiny reference engine spoke plainly and stopped"
ARCHITECTURE = "ref"
DIM = 64
N_LAYERS = 2
N_HEADS = 4
MAX_SEQ_LEN = 128
BOS, EOS, UNK = "<s>", "</s>", "<unk>"


def model_bytes(
    sentence: str = SENTENCE,
    *,
    dim: int = DIM,
    n_layers: int = N_LAYERS,
    n_heads: int = N_HEADS,
    max_seq_len: int = MAX_SEQ_LEN,
    architecture: str = ARCHITECTURE,
) -> bytes:
    """The bytes of a model whose greedy continuation of any of its words follows ``sentence``.

    Raises:
        ValueError: a word repeats, is longer than 255 bytes, or the architecture is over 31 bytes.
    """
    words = sentence.split()
    if len(set(words)) != len(words):
        raise ValueError(f"every word of the sentence must be unique: {sentence!r}")
    vocab = [BOS, EOS, UNK, *words]
    bos, eos, unk = 0, 1, 2
    arch = architecture.encode()
    if len(arch) > 31:
        raise ValueError(f"architecture name is longer than 31 bytes: {architecture!r}")
    header = b"BASE" + struct.pack(
        "<9I", 1, len(vocab), dim, n_layers, n_heads, max_seq_len, bos, eos, unk
    ) + arch.ljust(32, b"\0")
    body = bytearray()
    for word in vocab:
        raw = word.encode()
        if len(raw) > 255:
            raise ValueError(f"word longer than 255 bytes: {word!r}")
        body += bytes([len(raw)]) + raw
    first = 3
    nxt = {bos: first if words else eos, eos: eos, unk: eos}
    for i in range(len(words)):
        nxt[first + i] = first + i + 1 if i + 1 < len(words) else eos
    table = struct.pack(f"<{len(vocab)}I", *(nxt[i] for i in range(len(vocab))))
    return header + bytes(body) + table


def write_model(path: str | Path, sentence: str = SENTENCE, **kwargs: int | str) -> Path:
    """Write ``model_bytes(sentence, **kwargs)`` to ``path`` and return it.

    Raises:
        ValueError: as ``model_bytes``.
        OSError: the file cannot be written.
    """
    out = Path(path)
    out.write_bytes(model_bytes(sentence, **kwargs))  # type: ignore[arg-type]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--sentence", default=SENTENCE)
    parser.add_argument("--max-seq-len", type=int, default=MAX_SEQ_LEN)
    args = parser.parse_args(argv)
    write_model(args.out, args.sentence, max_seq_len=args.max_seq_len)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
