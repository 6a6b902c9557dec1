"""The engine thread over a scripted engine of several sequences (``BatchScript``), with no HTTP in between.

Each rule of continuous batching is a test: requests generating at once share each decode step and
answer what they answer alone; a request that arrives joins at the next step; a long prompt goes in
chunks of the batch between the others' tokens; a request let go frees its sequence at the next
step; a failed step fails the requests in it and drops their cache; a prompt sharing a prefix with
what a sequence holds decodes only the rest; requests beyond the sequences wait for one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from superfluid.runtime.serving.completions import CompletionRequest, RequestRefused, parse_completion
from superfluid.runtime.serving.generation import Generator
from tests.runtime.serving.scripted_engine import BatchScript

PIECES = [b"a", b"b", b"c", b"d", b"e"]


def completion(prompt: str, **fields: Any) -> CompletionRequest:
    return parse_completion(json.dumps({"prompt": prompt, "max_tokens": 12, **fields}).encode())


def until(done: Callable[[], bool]) -> None:
    for _ in range(1000):
        if done():
            return
        time.sleep(0.01)
    assert done()


def at_once(generator: Generator, engine: BatchScript, requests: list[CompletionRequest]) -> list[dict[str, Any]]:
    """The answers to ``requests`` asked together: the engine is held until every one is admitted."""
    answers: dict[int, dict[str, Any]] = {}
    engine.asked.clear()
    threads = [threading.Thread(target=lambda i=i, r=r: answers.update({i: generator.complete(r)}))
               for i, r in enumerate(requests)]
    for t in threads:
        t.start()
    until(lambda: generator.admitted == len(requests))
    time.sleep(0.05)  # the last admitted hands its prompt over
    engine.asked.set()
    for t in threads:
        t.join(30)
    return [answers[i] for i in range(len(requests))]


PROMPTS = ["one two three", "a bb ccc dddd", "x", "the cat sat on the mat"]


def test_requests_generating_together_share_each_step_and_answer_as_alone() -> None:
    alone = [Generator(BatchScript(PIECES)).complete(completion(p)) for p in PROMPTS]
    engine = BatchScript(PIECES)
    generator = Generator(engine, queue=0)
    together = at_once(generator, engine, [completion(p) for p in PROMPTS])
    assert [a["choices"][0]["text"] for a in together] == [a["choices"][0]["text"] for a in alone]
    assert [a["usage"] for a in together] == [a["usage"] for a in alone]
    assert max(len(step) for step in engine.steps) == 4
    stats = generator.stats()
    assert stats.steps[4] >= 11 and stats.busy == 0 and stats.generated_tokens == 4 * 12


def arrive(generator: Generator, engine: BatchScript, request: CompletionRequest,
           answers: list[dict[str, Any]]) -> threading.Thread:
    """``request`` asked while the engine is held between two steps of the others; then let go."""
    engine.asked.clear()
    admitted = generator.admitted
    thread = threading.Thread(target=lambda: answers.append(generator.complete(request)))
    thread.start()
    until(lambda: generator.admitted == admitted + 1)
    time.sleep(0.05)  # its prompt handed over
    engine.asked.set()
    return thread


def test_a_request_that_arrives_joins_at_the_next_step() -> None:
    engine = BatchScript(PIECES, until=10_000)
    generator = Generator(engine)
    first = generator.start(completion("one two", max_tokens=5000))
    before = len(engine.steps)
    answers: list[dict[str, Any]] = []
    arrive(generator, engine, completion("three four five", max_tokens=3), answers).join(30)
    assert answers[0]["usage"]["completion_tokens"] == 3
    steps = [[(f.seq, len(f.tokens)) for f in step] for step in engine.steps[before:]]
    joined = steps.index([(0, 1), (1, 4)])  # the first's next token and the new prompt, in one step
    assert steps[joined + 1:joined + 3] == [[(0, 1), (1, 1)]] * 2  # then a token of each
    first.close()


def test_a_long_prompt_goes_in_chunks_between_the_others_tokens() -> None:
    engine = BatchScript(PIECES, n_batch=8, until=10_000)
    generator = Generator(engine)
    first = generator.start(completion("one", max_tokens=5000))
    before = len(engine.steps)
    answers: list[dict[str, Any]] = []
    arrive(generator, engine, completion(" ".join(["w"] * 20), max_tokens=2), answers).join(30)
    assert answers[0]["usage"]["prompt_tokens"] == 21
    steps = [[(f.seq, len(f.tokens)) for f in step] for step in engine.steps[before:]]
    chunked = steps.index([(0, 1), (1, 7)])  # the first's token, then what the batch holds of the prompt
    assert steps[chunked:chunked + 4] == [[(0, 1), (1, 7)]] * 3 + [[(0, 1), (1, 1)]]
    first.close()


def test_a_request_let_go_frees_its_sequence_at_the_next_step() -> None:
    engine = BatchScript(PIECES, n_seq=1, until=10_000)
    generator = Generator(engine, queue=0, wait=0.05)
    run = generator.start(completion("one two", max_tokens=5000))
    next(run.pieces())
    with pytest.raises(RequestRefused) as busy:
        generator.start(completion("three"))
    assert busy.value.code == "busy"
    run.close()  # a client gone, a stop string: the request lets go
    until(lambda: generator.stats().busy == 0)
    assert engine.ended == [(0, True)] and generator.stats().generated_tokens < 5000
    assert generator.complete(completion("three", max_tokens=2))["usage"]["completion_tokens"] == 2


def test_a_failed_step_fails_its_requests_and_drops_their_cache() -> None:
    engine = BatchScript(PIECES)
    generator = Generator(engine)
    engine.fail = True
    with pytest.raises(RequestRefused) as failed:
        generator.complete(completion("one two"))
    assert (failed.value.status, failed.value.kind) == (500, "server_error")
    assert engine.ended == [(0, False)] and engine.held[0] == []
    assert generator.complete(completion("one two"))["choices"][0]["finish_reason"] == "length"


def test_a_shared_prefix_is_not_decoded_again() -> None:
    engine = BatchScript(PIECES)
    generator = Generator(engine)
    first = generator.complete(completion("one two three four"))
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    before = len(engine.steps)
    again = generator.complete(completion("one two three four five six"))
    # the sequence holds the first prompt and its answer: the new prompt's first 5 tokens are reused
    assert again["usage"]["prompt_tokens_details"] == {"cached_tokens": 5}
    assert [len(f.tokens) for f in engine.steps[before]] == [2]
    same = generator.complete(completion("one two three four"))
    assert same["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}  # all but the last: its logits again
    assert same["choices"] == first["choices"]
    stats = generator.stats()
    assert (stats.prompt_tokens, stats.cached_tokens) == (5 + 7 + 5, 9)


def test_requests_beyond_the_sequences_wait_for_one() -> None:
    engine = BatchScript(PIECES, n_seq=2)
    generator = Generator(engine, queue=4)
    answers = at_once(generator, engine, [completion(p) for p in PROMPTS + ["z"] * 2])
    assert all(a["usage"]["completion_tokens"] == 12 for a in answers)
    assert max(len(step) for step in engine.steps) == 2


def test_a_shutdown_answers_every_generation_503() -> None:
    engine = BatchScript(PIECES, until=10_000)
    generator = Generator(engine)
    runs = [generator.start(completion(p, max_tokens=5000)) for p in PROMPTS[:2]]
    generator.close()
    for run in runs:
        with pytest.raises(RequestRefused) as stopped:
            "".join(run.pieces())
        assert (stopped.value.status, stopped.value.message) == (503, "the server is shutting down")
        run.close()
    assert engine.closed and generator.stats().busy == 0
    with pytest.raises(RequestRefused):
        generator.start(completion("x"))
