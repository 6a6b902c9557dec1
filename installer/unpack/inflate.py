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

from superfluid.installer.unpack.pages import keep_freed

try:
    from isal import __version__ as _isal_version
    from isal import igzip_lib, isal_zlib
except ImportError:  # no wheel for this platform: the standard library's, about 2.5x slower
    isal_zlib = None  # type: ignore[assignment]
    igzip_lib = None  # type: ignore[assignment]

__all__ = ["INFLATER", "ERRORS", "gzip_inflater", "raw_inflater", "crc32", "Decompressor", "Channel", "Packed",
           "Inflow"]

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
_DECIDE = 4 << 20  # compressed bytes after which ``Inflow`` decides which thread inflates the rest
_RATIO = 1.5  # tar bytes per gzip byte below which the reader inflates (see ``Inflow``)


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
        self._deflate = head.startswith(_GZIP)
        if self._deflate and igzip_lib is not None:
            self._engine = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)  # header and trailer checked
        elif self._deflate:
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
    def deflate(self) -> bool:
        """A gzip stream."""
        return self._deflate

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
        self._chunks: collections.deque[bytes | Packed] = collections.deque()
        self._queued = 0
        self._done = False
        self._cancelled = False
        self._error: BaseException | None = None  # raised at once
        self._last: BaseException | None = None  # raised once the queue is read
        self._cond = threading.Condition()

    def put(self, chunk: bytes | Packed) -> bool:
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

    def get(self) -> bytes | Packed:
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


class Packed:
    """Compressed bytes in a ``Channel``, for its reader to inflate (see ``Inflow``)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


class Inflow:
    """A tar's bytes, decompressed as the compressed ones are ``feed``-ed on one thread (the
    producer: the download, or a file read), for a reader (``read(n)``, as tarfile reads) on another.

    Who inflates: the producer receives, writes and hashes the compressed bytes; the reader parses
    the tar, judges every member, writes every file and hashes it for the receipt. On real engine
    archives (shared libraries, about 3x smaller as gzip) inflating is the largest single cost, about
    as much as all the rest together: past its first ``_DECIDE`` bytes (inflated by the producer,
    which then knows how well the stream compresses) such a stream goes to a thread of its own, so on
    two cores the pass takes about as long as the inflating alone (measured on 200 MB of libraries:
    producer 0.08 s, inflater 0.29 s, reader 0.19 s of CPU; with the producer inflating, 0.36 s on
    its thread). A gzip stream that barely compresses (``_RATIO``: stored blocks, incompressible
    padding) is handed over compressed instead (``Packed``) and the reader inflates it: there
    inflating is a copy, best made where its bytes are read next (measured on 210 MB: 0.427 s for
    the install that way, 0.445 s through a third thread). A short stream is inflated by the
    producer alone, an uncompressed tar goes to the reader as it comes. ``isal``, ``zlib``, ``lzma``
    and ``bz2`` release the GIL while they work, as do the hashes and the writes.
    """

    def __init__(self, capacity: int = _QUEUED) -> None:
        keep_freed()  # the chunks it passes between threads reuse the same pages (pages.py)
        self._channel = Channel(capacity)  # tar bytes (or Packed ones) for the reader
        self._packed = Channel(capacity)  # compressed bytes for the inflater thread, once it runs
        self._head = b""
        self._decompressor: Decompressor | None = None  # the producer's, until the inflater's or the reader's
        self._thread: threading.Thread | None = None  # the inflater, once the stream is known to compress
        self._open = True  # False once no more is wanted (the reader is gone, the stream ended or failed)
        self._fed = self._poured = 0  # compressed bytes in, tar bytes out (the producer's, until it decides)
        self._decided = False
        self._handing = False  # the producer hands the compressed bytes to the reader, which inflates
        self._inflating = False  # the reader has compressed bytes to inflate
        self._rest = b""
        self.started = 0.0  # time.monotonic() when the first bytes (or the end) reached the reader

    # --- the producer's side ---

    def feed(self, chunk: bytes) -> bool:
        """Decompress ``chunk`` and queue what comes out, or queue it for the thread that inflates
        it (see the class doc), waiting while that one is behind. False once no more is wanted: the
        reader is gone, the compressed stream ended, or its data was corrupt (the reader gets the
        error after the bytes before it); once another thread inflates, it answers so from the
        chunk after that thread found out. Later chunks are ignored.
        """
        if not self._open:
            return False
        if self._decompressor is None:
            self._head += chunk
            if len(self._head) < _HEAD:
                return True
            chunk, self._head = self._head, b""
            self._decompressor = Decompressor(chunk)
        if self._thread is not None:
            self._open = self._packed.put(chunk)
            return self._open
        if self._handing:
            self._open = self._channel.put(Packed(chunk))
            return self._open
        return self._pour(chunk)

    def finish(self) -> None:
        """The compressed input ended: the reader reads to the end of what came out."""
        if self._open and self._decompressor is None:  # too short to tell: read as it is
            self._decompressor = Decompressor(self._head)
            self._pour(self._head)
        self._open = False
        self._inbox.finish()

    def fail(self, error: BaseException) -> None:
        """The compressed input could not be read: the reader gets what came out, then ``error``."""
        self._open = False
        self._inbox.fail(error)

    def abort(self, error: BaseException) -> None:
        """Stop the reader (its next ``read`` raises ``error``) and the inflater."""
        self._open = False
        self._channel.abort(error)
        self._packed.abort(error)

    @property
    def _inbox(self) -> Channel:
        """Where the producer's next chunk and its end go: the inflater's input once it runs."""
        return self._packed if self._thread is not None else self._channel

    def _pour(self, chunk: bytes) -> bool:
        d = self._decompressor
        assert d is not None
        try:
            d.give(chunk)
            while not d.ended and not d.hungry:
                out = d.take()
                self._poured += len(out)
                if out and not self._channel.put(out):
                    self._open = False  # the reader is gone: the rest is not decompressed
                    return False
        except Exception as e:  # corrupt compressed data: the reader's error, in its turn
            self._open = False
            self._channel.fail(e)
            return False
        if d.ended:
            self._open = False
            self._channel.finish()
            return False
        self._fed += len(chunk)
        if not self._decided and self._fed >= _DECIDE:  # d holds no input now: another thread may take it
            self._decided = True
            self._handing = d.deflate and self._poured < _RATIO * self._fed
            if not self._handing and d.compressed:
                self._thread = threading.Thread(target=self._inflate, name="superfluid-inflate", daemon=True)
                self._thread.start()
        return True

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
                assert not isinstance(chunk, Packed)
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
        data = self._rest or self._next()
        if not self.started:
            self.started = time.monotonic()
        if 0 <= n < len(data):
            self._rest = data[n:]
            return data[:n]
        self._rest = b""
        return data

    def _next(self) -> bytes:
        """The next bytes of the tar: as another thread inflated them, or inflated here from what
        the producer handed over (the decompressor is the reader's from the first ``Packed`` on)."""
        while True:
            if self._inflating:
                d = self._decompressor
                assert d is not None
                if d.ended:  # what follows the compressed stream is never read, as tarfile's
                    return b""
                if not d.hungry:
                    if out := d.take():
                        return out
                    continue
            item = self._channel.get()
            if not isinstance(item, Packed):
                return item
            assert self._decompressor is not None
            self._inflating = True
            self._decompressor.give(item.data)

    def cancel(self) -> None:
        """The reader needs no more: the producer's ``feed`` answers False from now on, the inflater stops."""
        self._channel.cancel()
        self._packed.cancel()
