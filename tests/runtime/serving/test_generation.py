"""Admission and generation on a scripted engine of one generation at a time, with no HTTP in between.

Each rule of a run is one row: what it yields piece by piece (never the start of a stop string
before it is ruled out, never half a character), how it finishes, and what is refused: a request
beyond the queue or the wait (503 busy), one after a shutdown, a prompt the context cannot hold.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from superfluid.runtime.serving.completions import (
    CompletionRequest,
    RequestRefused,
    Sampling,
    parse_chat,
    parse_completion,
)
from superfluid.runtime.serving.generation import Generator, Run
from tests.runtime.serving.scripted_engine import Script


def completion(**fields: Any) -> CompletionRequest:
    return parse_completion(json.dumps({"prompt": "a", **fields}).encode())


def refusal(call: Callable[[], object]) -> RequestRefused:
    with pytest.raises(RequestRefused) as caught:
        call()
    return caught.value


@pytest.mark.parametrize(("pieces", "stop", "sent", "finish"), [
    pytest.param([b" a", b" b", b" c"], [], [" a", " b", " c"], "stop", id="one-chunk-per-token"),
    pytest.param([b" a", b" b", b" c"], ["b"], [" a", " "], "stop", id="stop-inside-a-token"),
    pytest.param([b" a", b"X", b"Y", b" c"], ["XYZ"], [" a", "XY c"], "stop",
                 id="a-prefix-held-then-released"),
    pytest.param([b" a", b"X", b"Y", b"Z", b" c"], ["XYZ"], [" a"], "stop", id="a-prefix-held-then-cut"),
    pytest.param([b"caf", b"\xc3", b"\xa9", b"!"], [], ["caf", "\u00e9", "!"], "stop", id="a-character-sent-whole"),
    pytest.param([b"ok", b"\xc3"], [], ["ok", "\ufffd"], "stop", id="half-a-character-at-the-end"),
    pytest.param([b"a"] * 10, [], ["a"] * 4, "length", id="max-tokens"),
])
def test_a_run_yields_what_is_safe_to_send(pieces: list[bytes], stop: list[str], sent: list[str],
                                           finish: str) -> None:
    generator = Generator(Script(pieces), wait=30)
    request = completion(max_tokens=4 if finish == "length" else 64, stop=stop)
    run = generator.start(request)
    try:
        chunks = list(run.events())
    finally:
        run.close()
    assert [c["choices"][0]["text"] for c in chunks[:-1]] == sent
    assert chunks[-1]["choices"][0] == {"text": "", "index": 0, "finish_reason": finish, "logprobs": None}
    whole = generator.complete(request)
    assert whole["choices"][0]["text"] == "".join(sent) and whole["choices"][0]["finish_reason"] == finish


def test_a_full_context_ends_the_run_as_length() -> None:
    answer = Generator(Script([b"a"] * 10, room=1)).complete(completion(max_tokens=None))
    assert answer["choices"][0]["text"] == "aa" and answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 2  # the token that found it full counts, and is not fed


def test_sampling_reaches_the_engine_with_a_seed() -> None:
    engine = Script([b"x"])
    generator = Generator(engine)
    generator.complete(completion(temperature=0.5, top_p=0.9, top_k=4, seed=11))
    generator.complete(completion(temperature=0.5))
    generator.complete(completion(temperature=0, seed=3))
    assert engine.seen[0] == Sampling(0.5, 0.9, 4, 11)
    assert engine.seen[1] is not None and isinstance(engine.seen[1].seed, int)  # one drawn per request
    assert engine.seen[2] is None  # temperature 0: greedy, the seed changes nothing


@pytest.mark.parametrize(("words", "chat", "message"), [
    pytest.param(63, False, "the prompt is 64 tokens; the context holds 64 (serve --max-context N), leaving no "
                            "room to generate", id="a-prompt-that-fills-the-context"),
    pytest.param(63, True, "the prompt is 64 tokens; the context holds 64 (serve --max-context N), leaving no "
                           "room to generate", id="a-chat-that-fills-the-context"),
    pytest.param(0, False, "the prompt is empty and the model adds no beginning-of-text token",
                 id="an-empty-prompt-without-a-beginning-token"),
])
def test_a_prompt_the_context_cannot_hold_is_a_400_and_lets_go(words: int, chat: bool, message: str) -> None:
    class NoBeginning(Script):  # its tokens are the words alone
        def tokenize(self, text: str, *, special: bool = False) -> list[int]:
            return super().tokenize(text, special=special)[1:]

    engine = (Script if words else NoBeginning)([b"x"])
    generator = Generator(engine)
    text = " ".join(["w"] * words)
    body = {"messages": [{"role": "user", "content": text}]} if chat else {"prompt": text}
    request = (parse_chat if chat else parse_completion)(json.dumps(body).encode())
    refused = refusal(lambda: generator.start(request))
    assert (refused.status, refused.message, refused.param) == (400, message, "messages" if chat else "prompt")
    assert generator.admitted == 0 and generator.stats().busy == 0


def _admitted(generator: Generator, count: int) -> None:
    for _ in range(500):  # until the waiters hold their places in the queue
        if generator.admitted == count:
            return
        time.sleep(0.01)
    assert generator.admitted == count


def _hold(generator: Generator, engine: Script, request: CompletionRequest,
          answers: list[dict[str, Any]]) -> threading.Thread:
    """A request that takes the engine's one sequence and holds it (its first token awaited) until
    ``engine.asked`` is set; the whole answer goes into ``answers``."""
    engine.asked.clear()
    engine.started.clear()
    thread = threading.Thread(target=lambda: answers.append(generator.complete(request)))
    thread.start()
    assert engine.started.wait(10)
    return thread


@pytest.mark.parametrize("queue", [0, 1, 3])
def test_requests_beyond_the_queue_are_refused_busy_and_the_others_wait(queue: int) -> None:
    engine = Script([b"x", b"y"])
    generator = Generator(engine, queue=queue, wait=30)
    first: list[dict[str, Any]] = []
    holding = _hold(generator, engine, completion(), first)
    answers: list[dict[str, Any]] = []
    waiters = [threading.Thread(target=lambda: answers.append(generator.complete(completion())))
               for _ in range(queue)]
    for w in waiters:
        w.start()
    _admitted(generator, 1 + queue)
    refused = refusal(lambda: generator.start(completion()))
    assert (refused.status, refused.code, refused.headers) == (503, "busy", {"Retry-After": "1"})
    assert refused.message == (f"the server is busy: one request is generating and {queue} wait for the model "
                               f"(serve --queue N); try again")
    engine.asked.set()
    for t in (holding, *waiters):
        t.join(30)
    assert [a["choices"][0]["text"] for a in first + answers] == ["xy"] * (1 + queue)
    assert generator.admitted == 0


def test_a_request_the_model_is_not_free_for_within_the_wait_is_refused_busy() -> None:
    engine = Script([b"x"])
    generator = Generator(engine, wait=0.05)
    holding = _hold(generator, engine, completion(), [])
    try:
        refused = refusal(lambda: generator.start(completion()))
        assert (refused.status, refused.code) == (503, "busy")
        assert refused.message == "the server is busy: the model was not free within 0.05 s; try again"
        assert generator.admitted == 1  # its place in the queue given back
    finally:
        engine.asked.set()
        holding.join(30)


def test_a_shutdown_stops_the_run_and_refuses_what_comes_after() -> None:
    engine = Script([b"x"] * 50)
    generator = Generator(engine)
    run = generator.start(completion(max_tokens=50))
    pieces = run.pieces()
    assert next(pieces) == "x"
    generator.closing.set()
    refused = refusal(lambda: next(pieces))
    run.close()
    assert (refused.status, refused.message, refused.kind) == (503, "the server is shutting down", "server_error")
    assert refusal(lambda: generator.start(completion())).message == "the server is shutting down"
    generator.close()
    assert engine.closed


def test_a_run_stops_when_its_client_goes_away() -> None:
    asked: list[int] = []

    def gone() -> bool:
        asked.append(1)
        return len(asked) > 3

    generator = Generator(Script([b"x"] * 100))
    with pytest.raises(ConnectionResetError):
        generator.complete(completion(max_tokens=100), gone)
    assert len(asked) == 4 and generator.admitted == 0
    _until(lambda: generator.stats().busy == 0)  # its sequence freed at the engine's next step


def _until(done: Callable[[], bool]) -> None:
    for _ in range(500):
        if done():
            return
        time.sleep(0.01)
    assert done()


def test_a_drain_waits_for_the_answers_being_written() -> None:
    generator = Generator(Script([b"x"]))
    with generator.answering():
        assert generator.drain(0.01) is False
    assert generator.drain(0.01) is True


def test_a_run_counts_every_token_and_names_its_endpoint() -> None:
    generator = Generator(Script([b" hi", b" there"]))
    run: Run = generator.start(parse_chat(b'{"messages": [{"role": "user", "content": "a b"}]}'))
    try:
        assert "".join(run.pieces()) == " hi there"
        assert (run.n_prompt, run.n_out, run.finish) == (3, 3, "stop")  # the end token counts
        assert run.id.startswith("chatcmpl-")
    finally:
        run.close()
