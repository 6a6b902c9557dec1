"""The inflater (ISA-L's, else zlib), and a tar's bytes inflated on one thread for a reader on another.

See docs/install.md, "One pass".
"""

from __future__ import annotations

import bz2
import collections
import lzma
import threading
import time
import zlib
from typing import Any

try:
    from isal import __version__ as _isal_version
    from isal import igzip_lib, isal_zlib
except ImportError:  # no wheel for this platform: the standard library's, about 2.5x slower
    isal_zlib = None  # type: ignore[assignment]
    igzip_lib = None  # type: ignore[assignment]

__all__ = ["INFLATER", "ERRORS", "gzip_inflater", "raw_inflater", "crc32", "Decompressor", "Channel", "Inflow"]

#: which inflater decompresses gzip streams and zip members, in words: ISA-L's igzip through python-isal
#: where its wheel is installed (Linux x86_64 and aarch64, macOS), else the standard library's ``zlib``.
#: Measured on 200 MB of real shared libraries (72 MB as gzip -6), inflating alone in 1 MiB steps:
#: ``zlib`` 0.64 s, ``zlib-ng`` 0.35 s, ``isal`` 0.26 s
INFLATER = (f"isal {_isal_version} (ISA-L igzip)" if isal_zlib is not None
            else f"zlib {zlib.ZLIB_RUNTIME_VERSION} (the standard library's; isal is not installed)")
#: what a corrupt deflate stream raises, whichever inflater reads it
ERRORS: tuple[type[Exception], ...] = (zlib.error,) if isal_zlib is None else (zlib.error, isal_zlib.error)  # type: ignore[assignment]

_STEP = 1 << 20  # bytes of output per decompression call: memory stays bounded whatever the ratio
_QUEUED = 8 << 20  # bytes waiting between the two threads before the producer waits

# The compressions tarfile's "r|*" recognizes, by the same leading bytes.
_GZIP = b"\x1f\x8b\x08"
_BZIP2 = b"BZh91"
_XZ = (b"\xfd7zXZ", b"\x5d\x00\x00\x80")
_HEAD = 6  # bytes that tell them apart


def gzip_inflater() -> Any:
    """A decompressor of one gzip member (header and trailer checked), ``zlib.decompressobj``'s interface."""
    if isal_zlib is not None:
        return isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS)
    return zlib.decompressobj(16 + zlib.MAX_WBITS)


def raw_inflater() -> Any:
    """A decompressor of raw deflate (a zip member's data), ``zlib.decompressobj``'s interface."""
    if isal_zlib is not None:
        return isal_zlib.decompressobj(-isal_zlib.MAX_WBITS)
    return zlib.decompressobj(-zlib.MAX_WBITS)


def crc32(data: bytes | memoryview, value: int = 0) -> int:
    """The CRC-32 of zip and gzip, continued from ``value``."""
    if isal_zlib is not None:
        return isal_zlib.crc32(data, value)
    return zlib.crc32(data, value)


class Decompressor:
    """The archive's outer compression, recognized by its first bytes; an uncompressed tar passes.
    Fed compressed chunks (``give``), it answers at most ``_STEP`` bytes at a time (``take``)."""

    def __init__(self, head: bytes) -> None:
        self._input = b""
        self._engine: Any = None
        # zlib's interface leaves the input it did not read in ``unconsumed_tail`` (a copy each
        # step); ISA-L's own decompressor keeps it, as bz2's and lzma's do: 10% faster on 1 MiB chunks
        self._tail = False
        if head.startswith(_GZIP) and igzip_lib is not None:
            self._engine = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)  # header and trailer checked
        elif head.startswith(_GZIP):
            self._engine, self._tail = gzip_inflater(), True
        elif head.startswith(_BZIP2):
            self._engine = bz2.BZ2Decompressor()
        elif head.startswith(_XZ):
            self._engine = lzma.LZMADecompressor()

    @property
    def compressed(self) -> bool:
        """gzip, bzip2 or xz (not a tar as it is)."""
        return self._engine is not None

    @property
    def ended(self) -> bool:
        """The compressed stream ended (what follows its first member is never read, as tarfile's)."""
        return self._engine is not None and bool(self._engine.eof)

    @property
    def hungry(self) -> bool:
        """Nothing more comes out before more input goes in."""
        if self._input:
            return False
        return self._engine is None or self._tail or bool(self._engine.needs_input)

    def give(self, data: bytes) -> None:
        self._input = self._input + data if self._input else data

    def take(self) -> bytes:
        """The next decompressed bytes (at most ``_STEP``; maybe none while it reads a header).

        Raises:
            an error of ``ERRORS``, lzma.LZMAError, OSError, EOFError: corrupt compressed data.
        """
        if self._engine is None:
            out, self._input = self._input, b""
            return out
        out = self._engine.decompress(self._input, _STEP)
        self._input = self._engine.unconsumed_tail if self._tail else b""
        return bytes(out)


class Channel:
    """Byte chunks handed from one thread to the next, at most ``capacity`` bytes waiting.

    The writer ``put``s and ``finish``es (or ``fail``s: the reader gets what was queued, then the
    error); the reader ``get``s (``b""`` at the end). The reader ``cancel``s when it needs no more
    (the writer's later chunks are dropped, so it never blocks on a reader that is gone); ``abort``
    makes the reader's next ``get`` raise, whatever is queued.
    """

    def __init__(self, capacity: int = _QUEUED) -> None:
        self._capacity = capacity
        self._chunks: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._done = False
        self._cancelled = False
        self._error: BaseException | None = None  # raised at once
        self._last: BaseException | None = None  # raised once the queue is read
        self._cond = threading.Condition()

    def put(self, chunk: bytes) -> bool:
        """Hand over ``chunk``; False (and dropped) when the reader cancelled."""
        if not chunk:  # b"" is how the reader learns of the end: never a chunk
            return not self._cancelled and self._error is None
        with self._cond:
            while self._queued >= self._capacity and not self._cancelled and self._error is None:
                self._cond.wait()
            if self._cancelled or self._error is not None:
                return False
            self._chunks.append(chunk)
            self._queued += len(chunk)
            self._cond.notify_all()
            return True

    def finish(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        """End the stream with ``error``, raised to the reader after the chunks already queued."""
        with self._cond:
            if not self._done:
                self._last = error
                self._done = True
            self._cond.notify_all()

    def abort(self, error: BaseException) -> None:
        with self._cond:
            self._error = error
            self._chunks.clear()
            self._cond.notify_all()

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            self._chunks.clear()
            self._queued = 0
            self._cond.notify_all()

    def get(self) -> bytes:
        """The next chunk, ``b""`` when the writer finished (or the reader cancelled).

        Raises:
            the error given to ``abort``, or to ``fail`` once the chunks before it are read.
        """
        with self._cond:
            while not self._chunks and not self._done and self._error is None and not self._cancelled:
                self._cond.wait()
            if self._error is not None:
                raise self._error
            if not self._chunks:
                if self._cancelled:
                    return b""
                if self._last is not None:
                    raise self._last
                return b""
            chunk = self._chunks.popleft()
            self._queued -= len(chunk)
            self._cond.notify_all()
            return chunk


class Inflow:
    """A tar's bytes, decompressed on a thread of their own as the compressed ones are ``feed``-ed
    on another, for a reader (``read(n)``, as tarfile reads) on a third.

    Why three: on real engine archives (shared libraries, about 3x smaller as gzip) inflating is
    the largest single cost of an install, about as much as all the rest together. The producer
    (the download, or a file read) receives, writes and hashes the compressed bytes; the reader
    parses the tar, judges every member, writes every file and hashes it for the receipt; the
    inflater does nothing else, so on two cores it runs beside the other two and the pass takes
    about as long as the inflating alone (measured on 200 MB of libraries: producer 0.08 s,
    inflater 0.29 s, reader 0.19 s of CPU; with the producer inflating, 0.36 s on its thread).
    ``isal``, ``zlib``, ``lzma`` and ``bz2`` release the GIL while they work, as do the hashes and
    the writes. A tar that is not compressed goes to the reader as it comes (no third thread).
    """

    def __init__(self, capacity: int = _QUEUED) -> None:
        self._packed = Channel(capacity)  # compressed bytes, from the producer to the inflater
        self._channel = Channel(capacity)  # tar bytes, from the inflater (or the producer) to the reader
        self._head = b""
        self._decompressor: Decompressor | None = None  # the inflater's, once the first bytes told which
        self._thread: threading.Thread | None = None
        self._open = True  # False once no more is wanted (the reader is gone, the stream ended or failed)
        self._rest = b""
        self.started = 0.0  # time.monotonic() when the first bytes (or the end) reached the reader

    # --- the producer's side ---

    def feed(self, chunk: bytes) -> bool:
        """Queue ``chunk`` for the inflater (an uncompressed tar: for the reader), waiting while it
        is behind. False once no more is wanted: the reader is gone, the compressed stream ended,
        or its data was corrupt (the reader gets the error after the bytes before it); it answers
        so from the chunk after the inflater found out, and later chunks are ignored.
        """
        if not self._open:
            return False
        if self._decompressor is None:
            self._head += chunk
            if len(self._head) < _HEAD:
                return True
            chunk, self._head = self._head, b""
            self._begin(chunk)
        out = self._channel if self._thread is None else self._packed
        self._open = out.put(chunk)
        return self._open

    def finish(self) -> None:
        """The compressed input ended: the reader reads to the end of what came out."""
        if self._open and self._decompressor is None:  # too short to tell: read as it is
            self._begin(self._head)
            (self._channel if self._thread is None else self._packed).put(self._head)
        self._open = False
        (self._channel if self._thread is None else self._packed).finish()

    def fail(self, error: BaseException) -> None:
        """The compressed input could not be read: the reader gets what came out, then ``error``."""
        self._open = False
        (self._channel if self._thread is None else self._packed).fail(error)

    def abort(self, error: BaseException) -> None:
        """Stop the reader (its next ``read`` raises ``error``) and the inflater."""
        self._open = False
        self._channel.abort(error)
        self._packed.abort(error)

    def _begin(self, head: bytes) -> None:
        """The compression told by the first bytes: a thread inflates it, unless there is none."""
        self._decompressor = d = Decompressor(head)
        if d.compressed:
            self._thread = threading.Thread(target=self._inflate, name="superfluid-inflate", daemon=True)
            self._thread.start()

    # --- the inflater's side ---

    def _inflate(self) -> None:
        """Decompress what the producer queues into what the reader reads, until the compressed
        stream ends (what follows it is never read, as tarfile's), its data is corrupt, the input
        ends or fails, or the reader is gone. The producer is told no more is wanted before the
        reader learns of the end, so a feed after the reader's last read answers False."""
        d = self._decompressor
        assert d is not None
        error: BaseException | None = None
        try:
            while not d.ended and (chunk := self._packed.get()):
                d.give(chunk)
                while not d.ended and not d.hungry:
                    if (out := d.take()) and not self._channel.put(out):
                        self._packed.cancel()  # the reader is gone: the rest is not decompressed
                        return
        except BaseException as e:  # corrupt compressed data, or the input's own error: the reader's, in its turn
            error = e
        self._packed.cancel()
        if error is None:
            self._channel.finish()
        else:
            self._channel.fail(error)

    # --- the reader's side ---

    def read(self, n: int = -1) -> bytes:
        """At most ``n`` bytes of the tar (all of the next chunk when ``n`` < 0), ``b""`` at its end.

        Raises:
            what the decompressor raised on corrupt data, or the error given to ``abort``.
        """
        data = self._rest or self._channel.get()
        if not self.started:
            self.started = time.monotonic()
        if 0 <= n < len(data):
            self._rest = data[n:]
            return data[:n]
        self._rest = b""
        return data

    def cancel(self) -> None:
        """The reader needs no more: the inflater stops, the producer's ``feed`` answers False."""
        self._channel.cancel()
        self._packed.cancel()
