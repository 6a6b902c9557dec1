"""What an engine gives the serving layer: one generation at a time, or several sequences a step.

See docs/adapters.md, "The serving interface".
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol, runtime_checkable

from superfluid.runtime.serving.completions import Sampling

__all__ = ["ServedEngine", "Sequential", "Generation", "Batched", "Feed", "Engine"]


class Generation(Protocol):
    """One generation in progress: the engine's state after the prompt (and each token fed)."""

    def next_token(self) -> int:
        """The next token: the most likely one (greedy), or the one the engine draws when sampling."""

    def feed(self, token: int) -> None:
        """Append ``token`` to the context, so that ``next_token`` predicts the one after it.

        Raises:
            RequestRefused: 500 when the engine fails.
        """

    def full(self) -> bool:
        """True when the context has no room to feed another token."""


class ServedEngine(Protocol):
    """What the HTTP layer needs of a loaded model, however it generates. An adapter's ``serve``
    implements it as ``Sequential`` (one generation at a time) or ``Batched`` (several at once)."""

    #: the runtime id: the ``owned_by`` of ``/v1/models`` and the server's name
    runtime_id: str
    #: the model's name as ``/v1/models`` and every answer give it
    model_id: str
    #: the model file, as announced
    model_path: str
    #: tokens one generation may hold, prompt included
    n_ctx: int

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """The prompt's tokens as the engine feeds them (a beginning-of-text token included);
        ``special``: the text is a formatted chat, whose control tokens are read as such. Asked on
        a request's own thread, while the engine decodes others.

        Raises:
            RequestRefused: 400 when the engine refuses the text.
        """

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        """The ``(role, content)`` messages formatted by the model's chat template, ending where
        the assistant's answer begins (asked as ``tokenize`` is).

        Raises:
            RequestRefused: 400 when the model carries no chat template the engine can apply.
        """

    def is_eos(self, token: int) -> bool:
        """True for an end-of-generation token (it ends the text and adds none)."""

    def piece(self, token: int) -> bytes:
        """The bytes of one token's text (UTF-8; a character may span tokens)."""

    def facts(self) -> dict[str, Any]:
        """What the ready line says of the engine besides the address, model and context
        (e.g. ``{"runtime": "<version>", "layout": "v2", "library": "<path>"}``)."""

    def close(self) -> None:
        """Free the model (called once, with no generation running)."""


class Sequential(ServedEngine, Protocol):
    """An engine that runs one generation at a time (baseRT): the serving layer queues the others."""

    def generation(self, prompt: list[int], sampling: Sampling | None) -> AbstractContextManager[Generation]:
        """A fresh generation with ``prompt`` fed (nothing of an earlier one is seen), greedy when
        ``sampling`` is None, else drawing by it (its ``seed`` is always set here).

        Raises:
            RequestRefused: 400 when the engine cannot sample; 500 when it fails on the prompt.
        """


class Feed(NamedTuple):
    """What one step decodes of one sequence: ``tokens`` at its next positions, and whether the
    token after the last of them is drawn (``sample``: the end of a prompt, or a generated token)."""

    seq: int
    tokens: Sequence[int]
    sample: bool


@runtime_checkable
class Batched(ServedEngine, Protocol):
    """An engine that decodes up to ``n_seq`` sequences together, one step at a time (continuous
    batching). Sequence ids are ``0 .. n_seq - 1``; each holds the tokens decoded into it, position
    by position, and keeps them when its generation ends, so that the next prompt sharing a prefix
    with them decodes only the rest. Every call comes from the one engine thread
    (``runtime.serving.scheduler``), never two at once."""

    #: sequences one step may decode together
    n_seq: int
    #: tokens one step may decode, prompts included (at least ``n_seq``: every generating sequence
    #: has its token in every step)
    n_batch: int

    def pick(self, prompt: Sequence[int], free: Sequence[int]) -> int:
        """Which of the ``free`` sequences ``prompt`` starts in: the one already holding most of it."""

    def begin(self, seq: int, prompt: Sequence[int], sampling: Sampling | None) -> int:
        """Sequence ``seq`` starts a generation of ``prompt`` (greedy when ``sampling`` is None):
        it keeps the longest prefix of ``prompt`` it holds and drops the rest; how many tokens it
        kept, fewer than ``len(prompt)`` (the rest is fed by ``step``).

        Raises:
            RequestRefused: 400 for sampling it cannot do; 500 when the engine fails.
        """

    def step(self, feeds: Sequence[Feed]) -> list[int]:
        """Decode every feed (one per sequence) in one step; the token drawn for each feed that
        samples, in the order of ``feeds``.

        Raises:
            RequestRefused: 500 when the engine fails (every sequence of the step fails with it).
        """

    def full(self, seq: int) -> bool:
        """True when sequence ``seq`` has no room to feed another token."""

    def end(self, seq: int, *, keep: bool = True) -> None:
        """The generation in ``seq`` ended: its sampling freed; its tokens stay cached for the next
        prompt (``keep``), or are dropped (after a failed step)."""


#: what ``serving.http.serve_engine`` serves
Engine = Sequential | Batched
