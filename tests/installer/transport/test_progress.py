"""The download progress bar (issue 15, item 5): units, rate, time left, width, and at most ten
redraws a second. ``bar_line`` is a table; ``TerminalProgress`` runs on a fake clock and on the
real one; the bar on a real terminal (a pty), and nothing on a pipe or in CI, is in
``tests/end_to_end/test_progress_tty.py``."""

from __future__ import annotations

import io
import time

import pytest

from superfluid.installer.transport.progress import TerminalProgress, bar_line, eta_text, rate_text, size_text

KB, MB, GB = 1_000, 1_000_000, 1_000_000_000
LONG = "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz"


@pytest.mark.parametrize(("done", "total", "text"), [
    (0, 1_177, "0.0/1.2 kB"),
    (612, 1_177, "0.6/1.2 kB"),
    (300 * KB, 300 * KB, "300.0/300.0 kB"),  # a small file is counted in kB, not as 0.3 MB
    (999_949, 999_949, "999.9/999.9 kB"),
    (400 * KB, 2 * MB, "0.4/2.0 MB"),  # both in the unit of the whole
    (1_234 * MB, 3 * GB, "1.2/3.0 GB"),
    (5 * MB, None, "5.0 MB"),
    (12, None, "0.0 kB"),
], ids=["tiny", "kB", "kB-at-300k", "kB-just-under-1MB", "MB", "GB", "unknown-total", "a-few-bytes"])
def test_sizes(done: int, total: int | None, text: str) -> None:
    assert size_text(done, total) == text


@pytest.mark.parametrize(("rate", "text"), [
    (850 * KB, "850 kB/s"), (12 * KB, "12 kB/s"), (2_500, "2.5 kB/s"), (3, "0.0 kB/s"), (12_345_678, "12.3 MB/s"),
    (2.5 * GB, "2.5 GB/s"),
])
def test_rates(rate: float, text: str) -> None:
    assert rate_text(rate) == text


@pytest.mark.parametrize(("seconds", "text"), [(0.2, "0:01"), (7, "0:07"), (750, "12:30"), (3723, "1:02:03")])
def test_time_left(seconds: float, text: str) -> None:
    assert eta_text(seconds) == text


@pytest.mark.parametrize(("what", "done", "total", "rate", "width", "line"), [
    ("engine.tar.gz", 0, 40 * MB, None, 80, "engine.tar.gz  [....................]   0%  0.0/40.0 MB"),
    ("engine.tar.gz", 10 * MB, 40 * MB, 5 * MB, 80,
     "engine.tar.gz  [#####...............]  25%  10.0/40.0 MB  5.0 MB/s  ETA 0:06"),
    ("small.txt", 600, 1_200, 300, 80, "small.txt  [##########..........]  50%  0.6/1.2 kB  0.3 kB/s  ETA 0:02"),
    ("engine.tar.gz", 40 * MB, 40 * MB, 5 * MB, 80,
     "engine.tar.gz  [####################] 100%  40.0/40.0 MB  5.0 MB/s"),
    ("stream", 3 * MB, None, 1 * MB, 80, "stream  3.0 MB  1.0 MB/s"),
    (LONG, 10 * MB, 40 * MB, 5 * MB, 90,
     "…-ubuntu-vulkan-x64.tar.gz  [#####...............]  25%  10.0/40.0 MB  5.0 MB/s  ETA 0:06"),
    (LONG, 10 * MB, 40 * MB, 5 * MB, 60, "…u-vulkan-x64.tar.gz  25%  10.0/40.0 MB  5.0 MB/s  ETA 0:06"),
    (LONG, 10 * MB, 40 * MB, 5 * MB, 40, "…64.tar.gz  25%  10.0/40.0 MB  5.0 MB/s"),
    (LONG, 10 * MB, 40 * MB, 5 * MB, 20, "25%  10.0/40.0 MB"),
], ids=["starting", "half-way-with-rate-and-eta", "kB-file", "done-no-eta", "unknown-total",
        "long-name-shortened-from-the-left", "narrower-drops-the-bar", "narrower-still-drops-the-time-left",
        "narrowest-keeps-the-numbers"])
def test_bar_line(what: str, done: int, total: int | None, rate: float | None, width: int, line: str) -> None:
    got = bar_line(what, done, total, rate, width)
    assert got == line and len(got) <= width - 1  # never wraps


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _frames(out: str) -> list[str]:
    return [f for f in out.split("\r\x1b[K") if f]


def test_at_most_ten_redraws_a_second_however_many_chunks() -> None:
    clock, out = _Clock(), io.StringIO()
    bar = TerminalProgress(out, clock=clock, width=100)
    bar.start("a.tar.gz", 10 * MB)
    for _ in range(2000):  # 2000 chunks of 5 kB over 2 s
        clock.now += 0.001
        bar.advance("a.tar.gz", 5 * KB)
    bar.finish("a.tar.gz")
    frames = _frames(out.getvalue())
    assert bar.frames == len(frames) and 18 <= len(frames) <= 21
    assert frames[0] == "a.tar.gz  [....................]   0%  0.0/10.0 MB"
    assert frames[-1].startswith("a.tar.gz  [###################.]  95%  9.6/10.0 MB  5.0 MB/s  ETA 0:01")
    assert out.getvalue().endswith("\r\x1b[K")  # cleared once finished


def test_many_small_files_do_not_redraw_more_often() -> None:
    clock, out = _Clock(), io.StringIO()
    bar = TerminalProgress(out, clock=clock, width=100)
    for i in range(100):  # 100 files of 2 kB within one second
        clock.now += 0.005
        bar.start(f"f{i}", 2 * KB)
        bar.advance(f"f{i}", 2 * KB)
        clock.now += 0.005
        bar.finish(f"f{i}")
    assert bar.frames <= 11


def test_two_files_at_once_are_summed() -> None:
    clock, out = _Clock(), io.StringIO()
    bar = TerminalProgress(out, clock=clock, width=100)
    bar.start("a", 1 * MB)
    bar.start("b", 3 * MB)
    clock.now += 1.0
    bar.advance("a", 1 * MB)
    assert _frames(out.getvalue())[-1] == "2 files  [#####...............]  25%  1.0/4.0 MB  1.0 MB/s  ETA 0:03"


def test_the_rate_is_recent() -> None:
    """After a fast start and a slow spell, the rate and the time left follow the slow spell."""
    clock, out = _Clock(), io.StringIO()
    bar = TerminalProgress(out, clock=clock, width=100)
    bar.start("a", 100 * MB)
    for _ in range(10):  # 10 MB/s for a second
        clock.now += 0.1
        bar.advance("a", 1 * MB)
    for _ in range(50):  # then 100 kB/s for five
        clock.now += 0.1
        bar.advance("a", 10 * KB)
    assert _frames(out.getvalue())[-1].endswith("  10.5/100.0 MB  100 kB/s  ETA 14:55")


def test_real_time_redraws() -> None:
    out = io.StringIO()
    bar = TerminalProgress(out, width=100)
    bar.start("a", None)
    began = time.monotonic()
    while time.monotonic() - began < 0.5:
        bar.advance("a", 1)
    assert 4 <= bar.frames <= 7  # ~10 a second
