"""Continuous batching on one llama_context: its sequences, decoded together in one llama_batch a step.

See docs/runtimes.md, "Serving: several requests at once".
"""

from __future__ import annotations

import ctypes as C
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.llamacpp.drive import Context, DecodeFailed, Sampler
from superfluid.runtime.llamacpp.layout import Batch
from superfluid.runtime.serving.completions import RequestRefused, Sampling
from superfluid.runtime.serving.engine import Feed

__all__ = ["Sequences", "common_prefix", "SIMILAR"]

#: a free sequence is picked for the prompt it holds the most of when that is more than this share
#: of the prompt (llama-server's ``--slot-prompt-similarity`` default); else one beside the busy ones
SIMILAR = 0.1


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _failed(e: SuperfluidError) -> RequestRefused:
    return RequestRefused(500, str(e), kind="server_error")


@dataclass
class _Slot:
    """One sequence: the tokens its cache holds (position by position) and its request's sampler."""

    tokens: list[int] = field(default_factory=list)
    sampler: Sampler | None = None  # None: the shared greedy chain
    used: int = 0  # when it last began a generation


class Sequences:
    """The sequences of ``ctx`` (``runtime.serving.engine.Batched``); ``close()`` frees their samplers.

    Each sequence is a KV-cache sequence id (``0 .. n_seq - 1``: the context is made with
    ``n_seq_max`` of them, one cache stream each, ``kv_unified`` off) with the tokens its cache
    holds. A step fills one ``llama_batch`` made here: each sequence's tokens at its next positions,
    tagged with its id, logits asked only for the last token of a sequence that samples; one
    ``llama_decode``; then each sampling sequence's token drawn by its own sampler chain from the
    logits of its place in the batch (``llama_sampler_sample(chain, ctx, index)``; greedy is
    llama.cpp's greedy sampler, never a loop over the vocabulary in Python). A sequence keeps its
    tokens when its generation ends, so that the next prompt sharing a prefix with them decodes only
    the rest (as llama-server's slots do); the rest is removed then (``llama_memory_seq_rm``).
    """

    def __init__(self, ctx: Context) -> None:
        lib = ctx.model.lib
        fn = lib.fn
        self.ctx = ctx
        self.n_seq = int(fn["llama_n_seq_max"](ctx.handle))
        self.n_ctx = int(fn["llama_n_ctx_seq"](ctx.handle))
        self.n_batch = int(fn["llama_n_batch"](ctx.handle))
        self._lib = lib
        self._decode = fn["llama_decode"]
        self._seq_rm = fn["llama_memory_seq_rm"]
        self._memory = fn["llama_get_memory"](ctx.handle)
        self._slots = [_Slot() for _ in range(self.n_seq)]
        self._clock = itertools.count(1)
        self._greedy = Sampler.greedy(lib)
        # the batch, filled in place each step: n_batch places, one sequence id each
        cap = self.n_batch
        self._token = (C.c_int32 * cap)()
        self._pos = (C.c_int32 * cap)()
        self._n_seq_id = (C.c_int32 * cap)(*([1] * cap))
        self._ids = [(C.c_int32 * 1)(seq) for seq in range(self.n_seq)]
        self._id = [C.cast(i, C.POINTER(C.c_int32)) for i in self._ids]
        self._seq_id = (C.POINTER(C.c_int32) * cap)()
        self._logits = (C.c_int8 * cap)()
        self._batch = Batch(n_tokens=0, token=C.cast(self._token, C.POINTER(C.c_int32)),
                            pos=C.cast(self._pos, C.POINTER(C.c_int32)),
                            n_seq_id=C.cast(self._n_seq_id, C.POINTER(C.c_int32)),
                            seq_id=C.cast(self._seq_id, C.POINTER(C.POINTER(C.c_int32))),
                            logits=C.cast(self._logits, C.POINTER(C.c_int8)))

    def held(self, seq: int) -> int:
        """How many tokens sequence ``seq`` holds."""
        return len(self._slots[seq].tokens)

    def pick(self, prompt: Sequence[int], free: Sequence[int]) -> int:
        """The free sequence holding the longest prefix of ``prompt`` (more than ``SIMILAR`` of it, and
        more than its first token);
        else, of the free ones beside the most busy sequences, the least recently begun (its cache
        is the one least likely asked again, as llama-server's least-recently-used slot).

        Why beside: llama.cpp splits a step of separate KV streams into micro-batches of consecutive
        sequence ids, so sequences busy side by side are decoded in one; a hole between them splits
        the step, and a micro-batch of one token is a matrix-vector product, a slower one."""
        best, most = None, max(SIMILAR * len(prompt), 1)  # a beginning-of-text token alone is no prefix
        for seq in free:
            n = common_prefix(self._slots[seq].tokens, prompt)
            if n > most:
                best, most = seq, n
        if best is not None:
            return best
        busy = set(range(self.n_seq)).difference(free)
        return min(free, key=lambda s: (-((s - 1) in busy) - ((s + 1) in busy), self._slots[s].used))

    def begin(self, seq: int, prompt: Sequence[int], sampling: Sampling | None) -> int:
        """Keep the longest prefix of ``prompt`` that ``seq`` holds (short of its last token, whose
        logits are needed again), remove the rest from its cache; how many tokens it kept.

        Raises:
            RequestRefused: 500 when llama.cpp makes no sampler chain.
        """
        slot = self._slots[seq]
        keep = min(common_prefix(slot.tokens, prompt), len(prompt) - 1)
        if keep < len(slot.tokens):
            if not self._seq_rm(self._memory, seq, keep, -1):  # a cache that cannot drop a part: drop it all
                self._seq_rm(self._memory, seq, -1, -1)
                keep = 0
            del slot.tokens[keep:]
        slot.used = next(self._clock)
        if sampling is not None:
            try:
                slot.sampler = Sampler.create(self._lib, temperature=sampling.temperature, top_p=sampling.top_p,
                                              top_k=sampling.top_k, seed=sampling.seed or 0)
            except SuperfluidError as e:
                raise _failed(e) from e
        return keep

    def step(self, feeds: Sequence[Feed]) -> list[int]:
        """One ``llama_decode`` of every feed; each sampling feed's token, in order.

        Raises:
            RequestRefused: 500 with llama.cpp's status and last log line when the decode fails.
        """
        i = 0
        outputs: dict[int, tuple[Sampler, int]] = {}
        for seq, tokens, sample in sorted(feeds, key=lambda f: f.seq):  # ids increasing: one micro-batch
            slot = self._slots[seq]
            n, at = len(tokens), len(slot.tokens)
            end = i + n
            self._token[i:end] = list(tokens)
            self._pos[i:end] = list(range(at, at + n))
            self._seq_id[i:end] = [self._id[seq]] * n
            self._logits[i:end] = [0] * n
            if sample:
                self._logits[end - 1] = 1
                outputs[seq] = (slot.sampler or self._greedy, end - 1)
            i = end
        self._batch.n_tokens = i
        self._lib.log.errors.clear()
        status = int(self._decode(self.ctx.handle, self._batch))
        if status != 0:
            raise _failed(DecodeFailed(status, self._lib.log.last()))
        for seq, tokens, _ in feeds:
            self._slots[seq].tokens.extend(tokens)
        drawn = {seq: sampler.sample(self.ctx.handle, index) for seq, (sampler, index) in outputs.items()}
        return [drawn[f.seq] for f in feeds if f.sample]

    def full(self, seq: int) -> bool:
        return len(self._slots[seq].tokens) >= self.n_ctx

    def end(self, seq: int, *, keep: bool = True) -> None:
        """Free the sequence's sampler; unless ``keep``, empty its cache too."""
        slot = self._slots[seq]
        if slot.sampler is not None:
            slot.sampler.close()
            slot.sampler = None
        if not keep:
            self._seq_rm(self._memory, seq, -1, -1)
            slot.tokens.clear()

    def close(self) -> None:
        for slot in self._slots:
            if slot.sampler is not None:
                slot.sampler.close()
                slot.sampler = None
        self._greedy.close()
