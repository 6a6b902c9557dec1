"""Scripted engines for the serving tests: one that "generates" a fixed list of byte strings, then the end
token, a generation at a time; and one that decodes several sequences in one step."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from superfluid.runtime.llamacpp.batching import common_prefix
from superfluid.runtime.serving.completions import RequestRefused, Sampling
from superfluid.runtime.serving.engine import Feed

__all__ = ["EOS", "Script", "ScriptedGeneration", "BatchScript"]

EOS = 0


class ScriptedGeneration:
    def __init__(self, engine: Script, sampling: Sampling | None) -> None:
        self.engine = engine
        self.i = 0
        self.sampling = sampling

    def next_token(self) -> int:
        self.engine.asked.wait(30)  # held until the test lets it go
        return self.i + 1 if self.i < len(self.engine.pieces) else EOS

    def feed(self, token: int) -> None:
        self.i += 1

    def full(self) -> bool:
        return self.engine.room is not None and self.i >= self.engine.room


class Script:
    """An engine whose generation is ``pieces`` (token i + 1 is ``pieces[i]``), then the end token.

    ``asked`` holds each ``next_token`` while it is clear; ``started`` is set when a generation starts;
    ``seen`` is the sampling of each generation; a prompt is one token and one per word of its text;
    ``room``: the tokens fed before the context is full (None: never full).
    """

    runtime_id = "script"
    model_id = "script"
    model_path = "/dev/null"
    n_ctx = 64

    def __init__(self, pieces: Sequence[bytes], *, room: int | None = None) -> None:
        self.pieces = list(pieces)
        self.room = room
        self.asked = threading.Event()
        self.asked.set()
        self.started = threading.Event()
        self.seen: list[Sampling | None] = []
        self.closed = False

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [99] + [99 for _ in text.split()]

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        return " ".join(content for _, content in messages)

    @contextmanager
    def generation(self, prompt: list[int], sampling: Sampling | None) -> Iterator[ScriptedGeneration]:
        self.seen.append(sampling)
        self.started.set()
        yield ScriptedGeneration(self, sampling)

    def is_eos(self, token: int) -> bool:
        return token == EOS

    def piece(self, token: int) -> bytes:
        return self.pieces[token - 1]

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.closed = True


class BatchScript(Script):
    """A ``Batched`` engine of ``n_seq`` sequences: the token drawn after a sequence's tokens is
    1 + their sum mod ``len(pieces)`` (so it depends on the prompt and on nothing else), the end
    token once it holds ``until`` tokens. ``steps`` records each step's feeds; ``asked`` holds each
    step while it is clear; ``fail`` makes the next step fail (a 500, as a failed decode);
    ``held[seq]`` is what a sequence holds, kept when its generation ends (a cached prefix)."""

    def __init__(self, pieces: Sequence[bytes], *, n_seq: int = 4, n_batch: int = 64, until: int = 40) -> None:
        super().__init__(pieces)
        self.n_seq = n_seq
        self.n_batch = n_batch
        self.n_ctx = 1 << 20
        self.until = until
        self.steps: list[list[Feed]] = []
        self.held: list[list[int]] = [[] for _ in range(n_seq)]
        self.ended: list[tuple[int, bool]] = []
        self.fail = False

    def pick(self, prompt: Sequence[int], free: Sequence[int]) -> int:
        return max(free, key=lambda s: (common_prefix(self.held[s], prompt), -s))

    def begin(self, seq: int, prompt: Sequence[int], sampling: Sampling | None) -> int:
        self.seen.append(sampling)
        keep = min(common_prefix(self.held[seq], prompt), len(prompt) - 1)
        del self.held[seq][keep:]
        self.started.set()
        return keep

    def step(self, feeds: Sequence[Feed]) -> list[int]:
        self.asked.wait(30)
        self.steps.append(list(feeds))
        assert sum(len(f.tokens) for f in feeds) <= self.n_batch and len({f.seq for f in feeds}) == len(feeds)
        if self.fail:
            self.fail = False
            raise RequestRefused(500, "llama_decode returned -1 (failed)", kind="server_error")
        out = []
        for feed in feeds:
            self.held[feed.seq] += feed.tokens
            if feed.sample:
                held = self.held[feed.seq]
                out.append(EOS if len(held) >= self.until else 1 + sum(held) % len(self.pieces))
        return out

    def full(self, seq: int) -> bool:
        return len(self.held[seq]) >= self.n_ctx

    def end(self, seq: int, *, keep: bool = True) -> None:
        self.ended.append((seq, keep))
        if not keep:
            self.held[seq].clear()

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """A beginning token, then one token per word: its length."""
        return [99] + [len(w) for w in text.split()]
