"""``installer/phases``: the wall-clock spans of one install, recorded only when asked."""

from __future__ import annotations

import threading
import time

import pytest

from superfluid.installer import phases as ph
from superfluid.installer.phases import Phases, phase


def test_spans_are_relative_to_the_origin_and_ordered_by_start() -> None:
    p = Phases(origin=100.0)
    p.add("extract", 101.5, 103.0)
    p.add("download", 101.0, 104.25)  # overlapping: a streamed download and its extraction
    assert p.spans() == [("download", 1.0, 4.25), ("extract", 1.5, 3.0)]
    assert p.to_json() == [{"phase": "download", "start": 1.0, "end": 4.25, "seconds": 3.25},
                           {"phase": "extract", "start": 1.5, "end": 3.0, "seconds": 1.5}]


def test_to_json_rounds_to_milliseconds() -> None:
    p = Phases(origin=0.0)
    p.add("probe", 0.00049, 1.23456)
    assert p.to_json() == [{"phase": "probe", "start": 0.0, "end": 1.235, "seconds": 1.234}]


def test_a_phase_is_recorded_also_when_its_block_raises() -> None:
    p = Phases()
    with pytest.raises(KeyError), phase(p, "publish"):
        raise KeyError("x")
    ((name, start, end),) = p.spans()
    assert name == "publish" and 0 <= start <= end


def test_no_phases_records_nothing_and_runs_the_block() -> None:
    ran = []
    with phase(None, "listing"):
        ran.append(1)
    assert ran == [1]


def test_threads_mark_their_own_spans() -> None:
    p = Phases(origin=0.0)
    threads = [threading.Thread(target=lambda i=i: [p.add(f"t{i}", j, j + 1) for j in range(100)]) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(p.spans()) == 400


def test_since_process_start_begins_with_the_start_span(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ph, "_process_age", lambda: 0.25)
    before = time.monotonic()
    p = Phases.since_process_start()
    ((name, start, end),) = p.spans()
    assert name == "start" and start == 0.0 and end == pytest.approx(0.25, abs=0.05)
    assert p.origin <= before - 0.2


def test_since_process_start_without_the_age_starts_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ph, "_process_age", lambda: None)
    before = time.monotonic()
    p = Phases.since_process_start()
    assert p.spans() == [] and p.origin >= before

