"""Admission and generation: requests queued before the engine's sequences, their tokens made text.

See docs/adapters.md, "The serving interface".
"""

from __future__ import annotations

import codecs
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any

from superfluid.runtime.serving.completions import CompletionRequest, RequestRefused, answer, chunk, usage_chunk
from superfluid.runtime.serving.engine import Engine
from superfluid.runtime.serving.flags import DEFAULT_QUEUE
from superfluid.runtime.serving.scheduler import Scheduler, Stats, Ticket, Token, shutting_down

__all__ = ["Generator", "Run", "WAIT_SECONDS"]

#: seconds a request waits for a free sequence before it is answered 503
WAIT_SECONDS = 300.0
#: seconds between two looks at the client and the shutdown while a token is awaited
_POLL = 0.5


def _busy(message: str) -> RequestRefused:
    return RequestRefused(503, message, kind="server_error", code="busy", headers={"Retry-After": "1"})


def _generating(n: int) -> str:
    return "one request is generating" if n == 1 else f"{n} requests are generating"


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of ``text`` may be the start of a stop string (not sent yet)."""
    longest = max((len(s) for s in stops), default=0)
    for k in range(min(len(text), longest - 1), 0, -1):
        tail = text[-k:]
        if any(s.startswith(tail) for s in stops):
            return k
    return 0


class Run:
    """One request's generation, holding a sequence of the engine until it ends or ``close()``.

    Made once the prompt is decoded (its refusal, if any, raised here); ``pieces()`` yields the
    text as it is made; then ``finish`` (``"stop"`` or ``"length"``), ``n_prompt``, ``n_cached``
    (prompt tokens the sequence already held, not decoded again) and ``n_out`` are final. Every
    generated token counts, the end-of-generation token and the one that completed a stop string
    included; the last one is never fed (nothing is asked after it).
    """

    def __init__(self, generator: Generator, request: CompletionRequest, stack: ExitStack,
                 gone: Callable[[], bool] | None = None) -> None:
        engine = generator.engine
        self.generator = generator
        self.request = request
        self._stack = stack
        self._gone = gone
        # os.urandom, as the secrets module draws them (importing it brings hmac and random: 8 ms of a start)
        self.id = f"{'chatcmpl' if request.chat else 'cmpl'}-{os.urandom(12).hex()}"
        self.created = int(time.time())
        with generator.touching():
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
            sampling = replace(sampling, seed=int.from_bytes(os.urandom(4), "big"))
        scheduler = generator.scheduler
        if not scheduler.reserve(generator.wait):
            raise _busy(f"the server is busy: the model was not free within {generator.wait:g} s; try again")
        self._ticket = Ticket(prompt, sampling, request.max_tokens)
        try:
            scheduler.submit(self._ticket)
        except BaseException:
            scheduler.unreserve()
            raise
        stack.callback(scheduler.cancel, self._ticket)
        self.n_prompt = len(prompt)
        self.n_out = 0
        self.finish = "length"
        self._next: Token | None = self._receive()  # the first token: the prompt is decoded
        self.n_cached = self._ticket.cached

    def _receive(self) -> Token:
        """The next token the engine thread made.

        Raises:
            RequestRefused: the engine's refusal; 503 when the server shuts down.
            ConnectionResetError: the client went away.
        """
        while True:
            try:
                item = self._ticket.out.get(timeout=_POLL)
            except queue.Empty:
                self._check()
                continue
            if isinstance(item, RequestRefused):
                raise item
            return item

    def _check(self) -> None:
        if self.generator.closing.is_set():
            raise shutting_down()
        if self._gone is not None and self._gone():
            raise ConnectionResetError("the client went away")

    def pieces(self) -> Iterator[str]:
        """The text, piece by piece: never a piece that may begin a stop string, nor half a character.

        Raises:
            RequestRefused: 503 when the server shuts down; 500 when the engine fails.
            ConnectionResetError: the client went away (``gone``): nobody waits for the rest.
        """
        request = self.request
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text, sent = "", 0
        while True:
            token, self._next = self._next, None
            if token is None:
                self._check()
                token = self._receive()
            self.n_out += 1
            if token.eos:
                self.finish = "stop"
                break
            text += decoder.decode(token.piece)
            cut = min((i for i in (text.find(s, sent) for s in request.stop) if i >= 0), default=-1)
            if cut >= 0:
                self.finish = "stop"
                yield text[sent:cut]
                return
            safe = len(text) - _held_back(text, request.stop)
            if safe > sent:
                yield text[sent:safe]
                sent = safe
            if token.last:
                break  # max_tokens, or the context is full: "length" either way
        text += decoder.decode(b"", final=True)
        if len(text) > sent:
            yield text[sent:]

    def answer(self) -> dict[str, Any]:
        """Generate to the end; the whole answer (``text_completion`` or ``chat.completion``)."""
        text = "".join(self.pieces())
        return answer(self.request, self.id, self.created, self.generator.engine.model_id, text, self.finish,
                      self.n_prompt, self.n_out, self.n_cached)

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
            yield usage_chunk(request, self.id, self.created, model, self.n_prompt, self.n_out, self.n_cached)

    def close(self) -> None:
        """Let go of the sequence (ended at the engine's next step if it has not) and of the place
        in the queue."""
        self._stack.close()


class Generator:
    """What generates on one engine: its engine thread, the queue admitted before its sequences,
    and the flag that stops it. ``start`` and ``complete`` turn a request into a ``Run``."""

    def __init__(self, engine: Engine, *, queue: int = DEFAULT_QUEUE, wait: float = WAIT_SECONDS) -> None:
        self.engine = engine
        self.created = int(time.time())
        self.closing = threading.Event()
        self.queue = queue
        self.wait = wait
        self.scheduler = Scheduler(engine)
        #: sequences the engine decodes together (1: one request at a time)
        self.sequences = self.scheduler.n_seq
        self._admitted = threading.BoundedSemaphore(queue + self.sequences)
        self._answering = 0
        self._answered = threading.Condition()
        self._touching = 0
        self._touched = threading.Condition()
        self._in = 0
        self._in_lock = threading.Lock()

    def _count(self, step: int) -> None:
        with self._in_lock:
            self._in += step

    @property
    def admitted(self) -> int:
        """Requests admitted now: those generating and those waiting for a sequence."""
        return self._in

    def stats(self) -> Stats:
        """What the engine thread has done (``GET /metrics``)."""
        return self.scheduler.stats()

    @contextmanager
    def touching(self) -> Iterator[None]:
        """A request's own call into the engine (tokenizing) for the block; ``close`` waits for it.

        Raises:
            RequestRefused: 503 once the server is shutting down.
        """
        with self._touched:
            if self.closing.is_set():
                raise shutting_down()
            self._touching += 1
        try:
            yield
        finally:
            with self._touched:
                self._touching -= 1
                self._touched.notify_all()

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
        """Admit ``request``, wait for a sequence and decode the prompt: the ``Run`` (the caller closes it).

        Raises:
            RequestRefused: 503 when the queue is full, the wait too long or the server shutting down;
                400 when the prompt leaves no room in the context or the engine refuses the request;
                500 when the engine fails.
            ConnectionResetError: ``gone`` said so while the prompt was decoded.
        """
        stack = ExitStack()
        try:
            if self.closing.is_set():
                raise shutting_down()
            if not self._admitted.acquire(blocking=False):
                raise _busy(f"the server is busy: {_generating(self.sequences)} and {self.queue} wait for the "
                            f"model (serve --queue N); try again")
            stack.callback(self._admitted.release)
            self._count(+1)
            stack.callback(self._count, -1)
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
        """Stop taking generations, end those in flight (503) and the engine thread, wait for the
        requests tokenizing, close the engine."""
        with self._touched:
            self.closing.set()
        self.scheduler.stop()
        with self._touched:
            self._touched.wait_for(lambda: self._touching == 0)
        self.engine.close()
