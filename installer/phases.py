"""Wall-clock phases of one install, recorded when asked (``runtime install --timings``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Phases", "phase"]


class Phases:
    """Spans ``(name, start, end)`` in seconds since ``origin`` (``time.monotonic()`` when made).
    Thread-safe: a pipeline's threads mark their own spans."""

    def __init__(self, origin: float | None = None) -> None:
        self.origin = time.monotonic() if origin is None else origin
        self._lock = threading.Lock()
        self._spans: list[tuple[str, float, float]] = []

    @classmethod
    def since_process_start(cls) -> Phases:
        """Phases counted from when this process started, its first span ``start`` (the interpreter,
        the imports, the command line) up to now; from now, without that span, where the start of
        a process cannot be read (Linux's ``/proc/self/stat`` only)."""
        now = time.monotonic()
        elapsed = _process_age()
        if elapsed is None:
            return cls(now)
        phases = cls(now - elapsed)
        phases.add("start", phases.origin, now)
        return phases

    def add(self, name: str, start: float, end: float) -> None:
        """Record that ``name`` ran from ``start`` to ``end`` (``time.monotonic()`` values)."""
        with self._lock:
            self._spans.append((name, start - self.origin, end - self.origin))

    def spans(self) -> list[tuple[str, float, float]]:
        """The spans recorded so far, in order of their start."""
        with self._lock:
            return sorted(self._spans, key=lambda s: s[1])

    def to_json(self) -> list[dict[str, Any]]:
        """``[{"phase", "start", "end", "seconds"}]``, seconds since ``origin`` (millisecond precision)."""
        return [{"phase": n, "start": round(s, 3), "end": round(e, 3), "seconds": round(e - s, 3)}
                for n, s, e in self.spans()]


def _process_age() -> float | None:
    """Seconds since this process started (Linux; 10 ms resolution), or None."""

    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime, after "pid (comm)"
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0 <= age < 3600 else None


@contextmanager
def phase(phases: Phases | None, name: str) -> Iterator[None]:
    """Mark the ``with`` block as phase ``name`` on ``phases`` (nothing when it is None), also
    when the block raises."""
    if phases is None:
        yield
        return
    start = time.monotonic()
    try:
        yield
    finally:
        phases.add(name, start, time.monotonic())
