"""The two shapes of a served engine: one that decodes sequences a step at a time is ``Batched``,
one that runs a generation at a time (``Sequential``) is driven as an engine of one sequence."""

from __future__ import annotations

from superfluid.runtime.serving.engine import Batched, Feed
from superfluid.runtime.serving.generation import Generator
from superfluid.runtime.serving.scheduler import OneSequence
from tests.runtime.serving.scripted_engine import BatchScript, Script


def test_an_engine_of_sequences_is_batched() -> None:
    engine = BatchScript([b"a"], n_seq=3)
    assert isinstance(engine, Batched)
    generator = Generator(engine)
    assert generator.sequences == 3 and generator.scheduler.engine is engine


def test_an_engine_of_one_generation_at_a_time_is_one_sequence() -> None:
    engine = Script([b"a", b"b"])
    assert not isinstance(engine, Batched)
    one = Generator(engine).scheduler.engine
    assert isinstance(one, OneSequence) and (one.n_seq, Generator(engine).sequences) == (1, 1)


def test_one_sequence_opens_a_generation_on_the_whole_prompt_then_feeds_a_token_a_step() -> None:
    one = OneSequence(Script([b"a", b"b"]))
    assert one.pick([99, 1], [0]) == 0 and one.begin(0, [99, 1], None) == 0  # nothing held: all decoded
    assert not one.full(0)
    assert one.step([Feed(0, [99, 1], True)]) == [1]
    assert one.step([Feed(0, [1], True)]) == [2]
    one.end(0)
    assert one.step([Feed(0, [99], True)]) == [1]  # a fresh generation
