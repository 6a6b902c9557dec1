"""Admission and generation: one engine behind a lock and a queue, a request's tokens made into text.

See docs/adapters.md, "The serving interface".
"""

from __future__ import annotations

import codecs
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import replace
from typing import Any, Protocol

from superfluid.runtime.serving.completions import (
    CompletionRequest,
    RequestRefused,
    Sampling,
    answer,
    chunk,
    usage_chunk,
)
from superfluid.runtime.serving.flags import DEFAULT_QUEUE

__all__ = ["ServedEngine", "Generation", "Generator", "Run", "WAIT_SECONDS"]

#: seconds a request waits for the engine before it is answered 503
WAIT_SECONDS = 300.0


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
    """What the HTTP layer needs of a loaded model. An adapter's ``serve`` implements it."""

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
        ``special``: the text is a formatted chat, whose control tokens are read as such.

        Raises:
            RequestRefused: 400 when the engine refuses the text.
        """

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        """The ``(role, content)`` messages formatted by the model's chat template, ending where
        the assistant's answer begins.

        Raises:
            RequestRefused: 400 when the model carries no chat template the engine can apply.
        """

    def generation(self, prompt: list[int], sampling: Sampling | None) -> AbstractContextManager[Generation]:
        """A fresh generation with ``prompt`` fed (nothing of an earlier one is seen), greedy when
        ``sampling`` is None, else drawing by it (its ``seed`` is always set here).

        Raises:
            RequestRefused: 400 when the engine cannot sample; 500 when it fails on the prompt.
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


def _shutting_down() -> RequestRefused:
    return RequestRefused(503, "the server is shutting down", kind="server_error")


def _busy(message: str) -> RequestRefused:
    return RequestRefused(503, message, kind="server_error", code="busy", headers={"Retry-After": "1"})


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of ``text`` may be the start of a stop string (not sent yet)."""
    longest = max((len(s) for s in stops), default=0)
    for k in range(min(len(text), longest - 1), 0, -1):
        tail = text[-k:]
        if any(s.startswith(tail) for s in stops):
            return k
    return 0


class Run:
    """One request's generation, holding the engine until ``close()``.

    ``pieces()`` yields the text as it is made; then ``finish`` (``"stop"`` or ``"length"``),
    ``n_prompt`` and ``n_out`` are final. Every generated token counts, the end-of-generation token
    and the one that completed a stop string included; the last one is never fed (nothing is asked
    after it).
    """

    def __init__(self, generator: Generator, request: CompletionRequest, stack: ExitStack,
                 gone: Callable[[], bool] | None = None) -> None:
        engine = generator.engine
        self.generator = generator
        self.request = request
        self._stack = stack
        self._gone = gone
        self.id = f"{'chatcmpl' if request.chat else 'cmpl'}-{secrets.token_hex(12)}"
        self.created = int(time.time())
        text = engine.chat_prompt(request.messages) if request.messages is not None else request.prompt
        prompt = engine.tokenize(text, special=request.chat)
        if not prompt:
            raise RequestRefused(400, "the prompt is empty and the model adds no beginning-of-text token",
                                 param="prompt")
        if len(prompt) >= engine.n_ctx:
            raise RequestRefused(400, f"the prompt is {len(prompt)} tokens; the context holds {engine.n_ctx} (serve "
                                      f"--max-context N), leaving no room to generate",
                                 param="messages" if request.chat else "prompt")
        sampling = request.sampling
        if sampling is not None and sampling.seed is None:
            sampling = replace(sampling, seed=secrets.randbits(32))
        self._gen = stack.enter_context(engine.generation(prompt, sampling))
        self.n_prompt = len(prompt)
        self.n_out = 0
        self.finish = "length"

    def pieces(self) -> Iterator[str]:
        """The text, piece by piece: never a piece that may begin a stop string, nor half a character.

        Raises:
            RequestRefused: 503 when the server shuts down; 500 when the engine fails.
            ConnectionResetError: the client went away (``gone``): nobody waits for the rest.
        """
        engine, gen, request = self.generator.engine, self._gen, self.request
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text, sent = "", 0
        while request.max_tokens is None or self.n_out < request.max_tokens:
            if self.generator.closing.is_set():
                raise _shutting_down()
            if self._gone is not None and self._gone():
                raise ConnectionResetError("the client went away")
            token = gen.next_token()
            self.n_out += 1
            if engine.is_eos(token):
                self.finish = "stop"
                break
            text += decoder.decode(engine.piece(token))
            cut = min((i for i in (text.find(s, sent) for s in request.stop) if i >= 0), default=-1)
            if cut >= 0:
                self.finish = "stop"
                yield text[sent:cut]
                return
            safe = len(text) - _held_back(text, request.stop)
            if safe > sent:
                yield text[sent:safe]
                sent = safe
            if self.n_out == request.max_tokens or gen.full():
                break  # done, or the context is full: "length" either way
            gen.feed(token)
        text += decoder.decode(b"", final=True)
        if len(text) > sent:
            yield text[sent:]

    def answer(self) -> dict[str, Any]:
        """Generate to the end; the whole answer (``text_completion`` or ``chat.completion``)."""
        text = "".join(self.pieces())
        return answer(self.request, self.id, self.created, self.generator.engine.model_id, text, self.finish,
                      self.n_prompt, self.n_out)

    def events(self) -> Iterator[dict[str, Any]]:
        """Generate to the end, chunk by chunk as streamed (a chat opens with the role)."""
        request, model = self.request, self.generator.engine.model_id
        if request.chat:
            yield chunk(request, self.id, self.created, model, None, None)
        for text in self.pieces():
            if text:
                yield chunk(request, self.id, self.created, model, text, None)
        yield chunk(request, self.id, self.created, model, "", self.finish)
        if request.include_usage:
            yield usage_chunk(request, self.id, self.created, model, self.n_prompt, self.n_out)

    def close(self) -> None:
        """Let go of the engine (the generation, the lock, the place in the queue)."""
        self._stack.close()


class Generator:
    """What generates on one engine: the lock that serializes its generations, the queue admitted
    before that lock, and the flag that stops it. ``start`` and ``complete`` turn a request into a ``Run``."""

    def __init__(self, engine: ServedEngine, *, queue: int = DEFAULT_QUEUE, wait: float = WAIT_SECONDS) -> None:
        self.engine = engine
        self.created = int(time.time())
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.queue = queue
        self.wait = wait
        self._admitted = threading.BoundedSemaphore(queue + 1)
        self._answering = 0
        self._answered = threading.Condition()
        self._in = 0
        self._in_lock = threading.Lock()

    def _count(self, step: int) -> None:
        with self._in_lock:
            self._in += step

    @property
    def admitted(self) -> int:
        """Requests admitted now: the one generating and those waiting for the model."""
        return self._in

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Count a request as being answered for the block (``drain`` waits for the count to fall)."""
        with self._answered:
            self._answering += 1
        try:
            yield
        finally:
            with self._answered:
                self._answering -= 1
                self._answered.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every answer being written (a 503 after a shutdown
        included) to go out; False when some did not."""
        with self._answered:
            return self._answered.wait_for(lambda: self._answering == 0, timeout)

    def start(self, request: CompletionRequest, gone: Callable[[], bool] | None = None) -> Run:
        """Admit ``request``, wait for the engine and feed the prompt: the ``Run`` (the caller closes it).

        Raises:
            RequestRefused: 503 when the queue is full, the wait too long or the server shutting down;
                400 when the prompt leaves no room in the context or the engine refuses the request;
                500 when the engine fails.
        """
        stack = ExitStack()
        try:
            if self.closing.is_set():
                raise _shutting_down()
            if not self._admitted.acquire(blocking=False):
                raise _busy(f"the server is busy: one request is generating and {self.queue} wait for the model "
                            f"(serve --queue N); try again")
            stack.callback(self._admitted.release)
            self._count(+1)
            stack.callback(self._count, -1)
            if not self.lock.acquire(timeout=self.wait):
                raise _busy(f"the server is busy: the model was not free within {self.wait:g} s; try again")
            stack.callback(self.lock.release)
            if self.closing.is_set():
                raise _shutting_down()
            return Run(self, request, stack, gone)
        except BaseException:
            stack.close()
            raise

    def complete(self, request: CompletionRequest, gone: Callable[[], bool] | None = None) -> dict[str, Any]:
        """The whole answer to ``request`` (see ``start`` and ``Run.answer``); ``gone`` tells that
        its client went away, which stops the generation.

        Raises:
            RequestRefused: as ``start``, and 503/500 while generating.
            ConnectionResetError: ``gone`` said so.
        """
        run = self.start(request, gone)
        try:
            return run.answer()
        finally:
            run.close()

    def close(self) -> None:
        """Stop taking generations, wait for the one in flight, close the engine."""
        self.closing.set()
        with self.lock:
            self.engine.close()
