"""Download progress: a bar on a terminal, silence anywhere else."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO, Any

from superfluid.installer.settings import ProgressMode

__all__ = ["Progress", "TerminalProgress", "progress_for", "bar_line", "size_text", "rate_text", "eta_text"]

_CLEAR = "\r\x1b[K"
_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
_BAR = 20  # cells
_WINDOW = 3.0  # seconds of history the rate is measured over


class Progress:
    """Progress reports for downloads; this base says nothing (CI, not a TTY, ``--json``)."""

    def start(self, name: str, total: int | None, done: int = 0) -> None:
        """A transfer of ``name`` begins (or restarts) with ``done`` bytes already present."""

    def advance(self, name: str, n: int) -> None:
        """``n`` more bytes of ``name`` arrived."""

    def finish(self, name: str) -> None:
        """``name`` is complete (or abandoned)."""

    def close(self) -> None:
        """No more transfers."""


def _unit(n: float) -> tuple[float, str]:
    for scale, unit in _UNITS:
        if n >= scale:
            return scale, unit
    return 1e3, "kB"


def size_text(done: int, total: int | None = None) -> str:
    """``612.0/1177.6 kB``, ``1.2/30.5 MB``: both in the unit of the larger (kB under 1 MB)."""
    scale, unit = _unit(max(done, total or 0))
    if total is None:
        return f"{done / scale:.1f} {unit}"
    return f"{done / scale:.1f}/{total / scale:.1f} {unit}"


def rate_text(per_second: float) -> str:
    """``850 kB/s``, ``0.3 kB/s``, ``12.3 MB/s``."""
    scale, unit = _unit(per_second)
    value = per_second / scale
    return f"{value:.0f} {unit}/s" if unit == "kB" and value >= 10 else f"{value:.1f} {unit}/s"


def eta_text(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``."""
    s = int(seconds + 0.999)
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def bar_line(what: str, done: int, total: int | None, rate: float | None, width: int = 80) -> str:
    """The progress line: ``what``, a bar and percent (total known), sizes, rate, time left.

    At most ``width - 1`` characters (the cursor's cell stays free, so the terminal never wraps
    it); ``what`` is shortened from the left (a file name's end is what tells files apart).
    """
    parts: list[str] = []
    if total:
        filled = min(_BAR, _BAR * done // total)
        parts.append(f"[{'#' * filled}{'.' * (_BAR - filled)}] {min(100, 100 * done // total):3d}%")
    parts.append(size_text(done, total))
    if rate:
        parts.append(rate_text(rate))
        if total and total > done:
            parts.append(f"ETA {eta_text((total - done) / rate)}")
    # a narrow terminal loses the bar (its percent stays), then the time left, then the rate
    for narrower in (lambda p: p, lambda p: p.split("] ")[-1].strip(), lambda p: "" if p.startswith("ETA") else p,
                     lambda p: "" if p.endswith("/s") else p):
        parts = [q for q in map(narrower, parts) if q]
        tail = "  " + "  ".join(parts)
        room = width - 1 - len(tail)
        if room >= 8:
            break
    if len(what) > room:
        what = "…" + what[len(what) - room + 1:] if room > 1 else ""
    return (what + tail if what else tail.lstrip())[: max(0, width - 1)]


def _width(stream: Any) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns if columns > 0 else 80


class TerminalProgress(Progress):
    """One self-rewriting line on a terminal (see ``bar_line``), redrawn at most once per
    ``interval`` seconds. Thread-safe: downloads of one plan report from several threads."""

    def __init__(self, stream: IO[str], *, interval: float = 0.1, clock: Callable[[], float] = time.monotonic,
                 width: int | None = None) -> None:
        self._stream = stream
        self._interval = interval
        self._clock = clock
        self._width = width
        self._lock = threading.Lock()
        self._items: dict[str, list[int | None]] = {}
        self._moved = 0
        self._samples: deque[tuple[float, int]] = deque()
        self._last: float | None = None
        self._shown = False
        self.frames = 0  # bars drawn so far (tests count them)

    def start(self, name: str, total: int | None, done: int = 0) -> None:
        with self._lock:
            self._items[name] = [done, total]
            self._draw()

    def advance(self, name: str, n: int) -> None:
        with self._lock:
            item = self._items.setdefault(name, [0, None])
            item[0] = (item[0] or 0) + n
            self._moved += n
            self._draw()

    def finish(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)
            if not self._items:
                self._clear()  # at once: the next line written on the stream starts clean
            else:
                self._draw()

    def close(self) -> None:
        with self._lock:
            self._items.clear()
            self._clear()

    def _clear(self) -> None:
        if self._shown:
            self._stream.write(_CLEAR)
            self._stream.flush()
            self._shown = False

    def _rate(self, now: float) -> float | None:
        """Bytes a second over the last ``_WINDOW`` seconds; None until half a second has passed."""
        self._samples.append((now, self._moved))
        while len(self._samples) > 2 and now - self._samples[1][0] >= _WINDOW:
            self._samples.popleft()
        then, moved = self._samples[0]
        if now - then < 0.5:
            return None
        return (self._moved - moved) / (now - then)

    def _draw(self) -> None:
        now = self._clock()
        rate = self._rate(now)
        if self._last is not None and now - self._last < self._interval:
            return
        self._last = now
        if not self._items:
            self._clear()
            return
        done = sum(int(d or 0) for d, _ in self._items.values())
        totals = [t for _, t in self._items.values()]
        total = sum(int(t or 0) for t in totals) if all(t is not None for t in totals) else None
        what = next(iter(self._items)) if len(self._items) == 1 else f"{len(self._items)} files"
        line = bar_line(what, done, total, rate, self._width or _width(self._stream))
        self._stream.write(_CLEAR + line)
        self._stream.flush()
        self._shown = True
        self.frames += 1


def progress_for(stream: IO[str] | None = None, *, mode: ProgressMode) -> Progress:
    """A progress bar on ``stream`` (default stderr) when ``mode`` is ``"terminal"`` and it is one;
    silence when it is not a TTY, or ``mode`` is ``"off"`` (``CI`` set, ``--json``: ``Settings.progress``)."""
    stream = sys.stderr if stream is None else stream
    if mode == "off" or not _isatty(stream):
        return Progress()
    return TerminalProgress(stream)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
