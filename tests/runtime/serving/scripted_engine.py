"""A scripted engine for the serving tests: it "generates" a fixed list of byte strings, then the end token."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from superfluid.runtime.serving.completions import Sampling

__all__ = ["EOS", "Script", "ScriptedGeneration"]

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
