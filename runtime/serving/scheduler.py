"""The engine thread: one thread owns the engine and decodes its sequences, one step at a time.

See docs/adapters.md, "The serving interface".
"""

from __future__ import annotations

import queue
import sys
import threading
from collections import Counter, deque
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import NamedTuple

from superfluid.runtime.serving.completions import RequestRefused, Sampling
from superfluid.runtime.serving.engine import Batched, Engine, Feed, Generation, Sequential

__all__ = ["Scheduler", "Ticket", "Token", "Stats", "OneSequence", "shutting_down"]


def shutting_down() -> RequestRefused:
    """The refusal of a request the server stops for."""
    return RequestRefused(503, "the server is shutting down", kind="server_error")


class Token(NamedTuple):
    """One generated token, as its request receives it."""

    id: int
    piece: bytes  # its text (b"" for an end token)
    eos: bool  # an end-of-generation token: it ends the text and adds none
    last: bool  # nothing follows it: the end token, max_tokens reached, or the context full


class Ticket:
    """One request's generation between its thread and the engine thread.

    The request reads ``out`` (each ``Token``, or the ``RequestRefused`` that ends it) and sets
    ``cancelled`` (through ``Scheduler.cancel``) when it lets go; ``cached`` is how many prompt
    tokens its sequence already held, final once the first token is out. The rest is the engine
    thread's.
    """

    def __init__(self, prompt: list[int], sampling: Sampling | None, max_tokens: int | None) -> None:
        self.prompt = prompt
        self.sampling = sampling
        self.max_tokens = max_tokens
        self.out: queue.SimpleQueue[Token | RequestRefused] = queue.SimpleQueue()
        self.cancelled = False
        self.cached = 0
        self.seq = -1
        self.todo: list[int] = []  # prompt tokens still to decode
        self.last: int | None = None  # the token to feed in the next step
        self.n_out = 0


@dataclass
class Stats:
    """What the engine thread has done, for ``GET /metrics``."""

    sequences: int  # sequences it decodes together (1: one request at a time)
    busy: int = 0  # sequences generating now
    steps: Counter[int] = field(default_factory=Counter)  # decode steps, by the sequences each decoded
    prompt_tokens: int = 0  # prompt tokens of the generations begun
    cached_tokens: int = 0  # of those, the ones a sequence already held (not decoded again)
    generated_tokens: int = 0


class OneSequence:
    """A ``Sequential`` engine (one generation at a time) driven as a ``Batched`` one of one
    sequence: its generation opens on the whole prompt in the first step (``n_batch`` holds any
    prompt), then each step feeds it one token."""

    n_seq = 1
    n_batch = sys.maxsize

    def __init__(self, engine: Sequential) -> None:
        self._engine = engine
        self._sampling: Sampling | None = None
        self._stack: ExitStack | None = None
        self._gen: Generation | None = None

    def pick(self, prompt: Sequence[int], free: Sequence[int]) -> int:
        return free[0]

    def begin(self, seq: int, prompt: Sequence[int], sampling: Sampling | None) -> int:
        self._sampling = sampling
        return 0  # a generation sees nothing of the one before

    def step(self, feeds: Sequence[Feed]) -> list[int]:
        (feed,) = feeds
        if self._gen is None:
            stack = ExitStack()
            try:
                self._gen = stack.enter_context(self._engine.generation(list(feed.tokens), self._sampling))
            except BaseException:
                stack.close()
                raise
            self._stack = stack
        else:
            for token in feed.tokens:
                self._gen.feed(token)
        return [self._gen.next_token()] if feed.sample else []

    def full(self, seq: int) -> bool:
        return self._gen is not None and self._gen.full()

    def end(self, seq: int, *, keep: bool = True) -> None:
        stack, self._stack, self._gen = self._stack, None, None
        if stack is not None:
            stack.close()


class Scheduler:
    """The engine thread over ``engine`` (started here) and the sequences requests reserve.

    A request (on its connection's thread) reserves a sequence, hands its prompt over as a
    ``Ticket`` and receives its tokens through the ticket's queue. The engine thread admits every
    prompt handed over at the start of the next step, decodes in that step the next token of every
    generating sequence and as much of the new prompts as the batch holds (a long prompt goes in
    chunks between decode steps), draws each sequence's next token, and ends a sequence at its end
    token, its ``max_tokens``, a full context, or at the step after its request lets go (a client
    gone, a stop string). A ``Sequential`` engine is driven the same way, as one sequence
    (``OneSequence``). Owning the engine from one thread also keeps its memory in one malloc arena:
    what a connection's thread freed stayed in that thread's arena.
    """

    def __init__(self, engine: Engine) -> None:
        self.served = engine
        self.engine: Batched | OneSequence = engine if isinstance(engine, Batched) else OneSequence(engine)
        self.n_seq = self.engine.n_seq
        self._cond = threading.Condition()
        self._free = self.n_seq  # sequences not reserved
        self._pending: deque[Ticket] = deque()
        self._stopping = False
        self._stats = Stats(self.n_seq)
        # the engine thread's own
        self._active: list[Ticket] = []  # in the order they began
        self._seqs = list(range(self.n_seq))  # sequence ids no generation holds
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    # -- a request's side ---------------------------------------------------------------------

    def reserve(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a sequence and hold it for one ``submit``; False when
        none came free.

        Raises:
            RequestRefused: 503 when the server is shutting down.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._free > 0 or self._stopping, timeout):
                return False
            if self._stopping:
                raise shutting_down()
            self._free -= 1
            return True

    def unreserve(self) -> None:
        """Give back a reservation that was never submitted."""
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    def submit(self, ticket: Ticket) -> None:
        """Hand ``ticket`` (holding a reservation, which the engine thread gives back when it ends)
        to the engine thread: it begins at the next step.

        Raises:
            RequestRefused: 503 when the server is shutting down (the reservation is still the caller's).
        """
        with self._cond:
            if self._stopping:
                raise shutting_down()
            self._pending.append(ticket)
            self._cond.notify_all()

    def cancel(self, ticket: Ticket) -> None:
        """The request lets go of ``ticket``: its sequence ends at the next step (if it has not)."""
        with self._cond:
            ticket.cancelled = True
            self._cond.notify_all()

    def stats(self) -> Stats:
        """A copy of what the engine thread has done."""
        with self._cond:
            s = self._stats
            return Stats(s.sequences, s.busy, Counter(s.steps), s.prompt_tokens, s.cached_tokens, s.generated_tokens)

    def stop(self) -> None:
        """Stop after the step in flight: each generation and each waiting request is answered
        503; then the engine thread ends (joined here). The engine is the caller's to close."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()

    # -- the engine thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or bool(self._pending) or bool(self._active))
                if self._stopping:
                    break
                admitted = list(self._pending)
                self._pending.clear()
            try:
                self._cycle(admitted)
            except Exception as e:  # noqa: BLE001 - a fault of ours: every generation fails, serving goes on
                self._fail_all(RequestRefused(500, f"internal error: {type(e).__name__}: {e}", kind="server_error"))
        with self._cond:
            left = list(self._pending)
            self._pending.clear()
        for ticket in left:
            ticket.out.put(shutting_down())
            self._give_back()
        self._fail_all(shutting_down())

    def _cycle(self, admitted: list[Ticket]) -> None:
        """One step: end what was let go, begin what was handed over, decode, deliver."""
        for ticket in [t for t in self._active if t.cancelled]:
            self._end(ticket)
        for ticket in admitted:
            self._begin(ticket)
        if not self._active:
            return
        feeds, sampled = self._plan()
        try:
            tokens = self.engine.step(feeds)
        except RequestRefused as e:
            for ticket in [t for t in self._active if t.seq in {f.seq for f in feeds}]:
                ticket.out.put(e)
                self._end(ticket, keep=False)
            return
        with self._cond:
            self._stats.steps[len(feeds)] += 1
            self._stats.generated_tokens += len(tokens)
        for ticket, token in zip(sampled, tokens, strict=True):
            self._deliver(ticket, token)

    def _begin(self, ticket: Ticket) -> None:
        if ticket.cancelled:
            self._give_back()
            return
        try:
            seq = self.engine.pick(ticket.prompt, self._seqs)
            self._seqs.remove(seq)
        except Exception as e:  # noqa: BLE001 - answered, never left waiting
            ticket.out.put(RequestRefused(500, f"internal error: {type(e).__name__}: {e}", kind="server_error"))
            self._give_back()
            return
        ticket.seq = seq
        self._active.append(ticket)
        try:
            ticket.cached = self.engine.begin(seq, ticket.prompt, ticket.sampling)
        except RequestRefused as e:
            ticket.out.put(e)
            self._end(ticket, keep=False)
            return
        ticket.todo = ticket.prompt[ticket.cached:]
        with self._cond:
            self._stats.busy = len(self._active)
            self._stats.prompt_tokens += len(ticket.prompt)
            self._stats.cached_tokens += ticket.cached

    def _plan(self) -> tuple[list[Feed], list[Ticket]]:
        """This step's feeds: every generating sequence's token, then the prompts' chunks while the
        batch has room; and the tickets whose next token it draws, in the order of their feeds."""
        budget = self.engine.n_batch
        feeds: list[Feed] = []
        sampled: list[Ticket] = []
        for ticket in self._active:
            if ticket.last is not None:
                feeds.append(Feed(ticket.seq, (ticket.last,), True))
                sampled.append(ticket)
                ticket.last = None
                budget -= 1
        for ticket in self._active:
            if ticket.todo and budget > 0:
                chunk, ticket.todo = ticket.todo[:budget], ticket.todo[budget:]
                feeds.append(Feed(ticket.seq, chunk, not ticket.todo))
                if not ticket.todo:
                    sampled.append(ticket)
                budget -= len(chunk)
        return feeds, sampled

    def _deliver(self, ticket: Ticket, token: int) -> None:
        ticket.n_out += 1
        eos = self.served.is_eos(token)
        last = eos or ticket.n_out == ticket.max_tokens or self.engine.full(ticket.seq)
        ticket.out.put(Token(token, b"" if eos else self.served.piece(token), eos, last))
        if last:
            self._end(ticket)
        else:
            ticket.last = token

    def _end(self, ticket: Ticket, *, keep: bool = True) -> None:
        """Free ``ticket``'s sequence for the next request."""
        self._active.remove(ticket)
        try:
            self.engine.end(ticket.seq, keep=keep)
        finally:
            self._seqs.append(ticket.seq)
            ticket.seq = -1
            with self._cond:
                self._stats.busy = len(self._active)
            self._give_back()

    def _give_back(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    def _fail_all(self, refusal: RequestRefused) -> None:
        for ticket in list(self._active):
            ticket.out.put(refusal)
            try:
                self._end(ticket, keep=False)
            except Exception:  # noqa: BLE001, S110 - the sequence is freed all the same; the others go on
                pass
