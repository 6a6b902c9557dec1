"""One pass from the network into the staging directory: downloaded, hashed and extracted at once.

See docs/install.md, "One pass".
"""

from __future__ import annotations

import bz2
import collections
import lzma
import os
import secrets
import threading
import time
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from superfluid.installer.cache.download import Download, Progress, download
from superfluid.installer.files import remove_tree
from superfluid.installer.phases import Phases, phase
from superfluid.installer.unpack.extract import (
    ExtractFailed,
    ExtractLimits,
    check_tree,
    extract_all,
    extract_archive,
    merge_tree,
)

if TYPE_CHECKING:
    from superfluid.installer.cache.blobs import Cache
    from superfluid.installer.transport.fetcher import Fetcher

__all__ = ["download_and_extract", "streams"]

_STEP = 1 << 20  # bytes of output per decompression call: memory stays bounded whatever the ratio
_QUEUED = 8 << 20  # bytes waiting between two stages before the writer waits
_ZIP_NAMES = (".zip",)

# The compressions tarfile's "r|*" recognizes, by the same leading bytes.
_GZIP = b"\x1f\x8b\x08"
_BZIP2 = b"BZh91"
_XZ = (b"\xfd7zXZ", b"\x5d\x00\x00\x80")


def streams(name: str) -> bool:
    """Whether an archive of this file name can be extracted as it downloads: a tar of any
    compression, not a zip (whose directory sits at its end)."""
    return not name.lower().endswith(_ZIP_NAMES)


class _Stopped(Exception):
    """The pipeline was stopped from outside (the download failed or lost its place)."""


class _Channel:
    """Byte chunks handed from one thread to the next, at most ``capacity`` bytes waiting.

    The writer ``put``s and ``finish``es; the reader ``get``s (``b""`` at the end). The reader
    ``cancel``s when it needs no more (the writer's later chunks are dropped, so it never blocks on
    a reader that is gone); ``abort`` makes the reader's next ``get`` raise.
    """

    def __init__(self, capacity: int = _QUEUED) -> None:
        self._capacity = capacity
        self._chunks: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._done = False
        self._cancelled = False
        self._error: BaseException | None = None
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
        """The next chunk, ``b""`` when the writer finished.

        Raises:
            the error given to ``abort``.
        """
        with self._cond:
            while not self._chunks and not self._done and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error
            if not self._chunks:
                return b""
            chunk = self._chunks.popleft()
            self._queued -= len(chunk)
            self._cond.notify_all()
            return chunk


class _Decompressor:
    """The archive's outer compression, recognized by its first bytes; an uncompressed tar passes.
    Fed compressed chunks (``give``), it answers at most ``_STEP`` bytes at a time (``take``)."""

    def __init__(self, head: bytes) -> None:
        self._input = b""
        self._engine: Any = None
        self._zlib = head.startswith(_GZIP)
        if self._zlib:
            self._engine = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif head.startswith(_BZIP2):
            self._engine = bz2.BZ2Decompressor()
        elif head.startswith(_XZ):
            self._engine = lzma.LZMADecompressor()

    @property
    def ended(self) -> bool:
        """The compressed stream ended (what follows its first member is never read, as tarfile's)."""
        return self._engine is not None and bool(self._engine.eof)

    @property
    def hungry(self) -> bool:
        """Nothing more comes out before more input goes in."""
        if self._engine is None or self._zlib:
            return not self._input
        return bool(self._engine.needs_input)

    def give(self, data: bytes) -> None:
        self._input = self._input + data if self._input else data

    def take(self) -> bytes:
        """The next decompressed bytes (at most ``_STEP``; maybe none while it reads a header).

        Raises:
            zlib.error, lzma.LZMAError, OSError, EOFError: corrupt compressed data.
        """
        if self._engine is None:
            out, self._input = self._input, b""
            return out
        out = self._engine.decompress(self._input, _STEP)
        self._input = self._engine.unconsumed_tail if self._zlib else b""
        return bytes(out)


class _Reader:
    """The tar as tarfile reads it (``read(n)`` only): the compressed chunks from the channel,
    decompressed here, in the reader's thread."""

    def __init__(self, channel: _Channel, pipeline: _Pipeline) -> None:
        self._channel = channel
        self._pipeline = pipeline
        self._rest = b""
        self._decompressor: _Decompressor | None = None

    def _next(self) -> bytes:
        """The next decompressed bytes, ``b""`` at the end of the stream (or of the download)."""
        if self._decompressor is None:
            head = b""
            while len(head) < 6 and (chunk := self._channel.get()):
                head += chunk
            self._decompressor = _Decompressor(head)
            self._decompressor.give(head)
        d = self._decompressor
        while not d.ended:
            if d.hungry:
                chunk = self._channel.get()
                if not chunk:
                    return b""
                d.give(chunk)
            if out := d.take():
                return out
        return b""

    def read(self, n: int = -1) -> bytes:
        data = self._rest or self._next()
        if not self._pipeline.started:
            self._pipeline.started = time.monotonic()
        if 0 <= n < len(data):
            self._rest = data[n:]
            return data[:n]
        self._rest = b""
        return data


class _Pipeline:
    """Hand what ``tee`` receives to a second thread, which decompresses it and reads the tar (see
    the module doc).

    Why the decompressor sits in the reader's thread: the downloading thread already writes and
    hashes every byte; measured on two cores, the pass is shortest when the two threads carry about
    the same work (a third thread for the decompressor only added hand-overs). zlib, lzma and bz2
    release the GIL while they work, as do the hash and the writes.
    """

    def __init__(self, label: str, dest: str, size: int, limits: ExtractLimits | None, descend: bool) -> None:
        self.label, self.dest, self.size, self.limits, self.descend = label, dest, size, limits, descend
        self.fed = 0  # bytes handed to the pipeline, contiguous from byte 0
        self.lost = False  # the download left the pipeline's place: extract from the file instead
        self.root: Path | None = None
        self.error: BaseException | None = None
        self.started = 0.0  # time.monotonic() when the first bytes reached the tar reader
        self._feeding = True  # False once the reader is gone: hash only
        self._tar = _Channel()
        self._thread = threading.Thread(target=self._extract, name="superfluid-extract", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def tee(self, offset: int, chunk: bytes) -> None:
        if self.lost:
            return
        if offset != self.fed:
            self.lost = True
            self._tar.abort(_Stopped())
            return
        self.fed += len(chunk)
        if self._feeding:  # refused once the reader is gone: the download goes on for its digest
            self._feeding = self._tar.put(chunk)

    def _extract(self) -> None:
        try:
            self.root = extract_archive(self.label, self.dest, limits=self.limits, descend=self.descend,
                                        stream=cast("IO[bytes]", _Reader(self._tar, self)), size=self.size)
        except BaseException as e:  # corrupt compressed data among them: a bad file, in its turn
            self.error = e
        finally:
            self._tar.cancel()  # the tar ended (or failed): the rest of the download is hashed, not read

    def stop(self) -> None:
        """Stop the reader and remove what it wrote."""
        self._tar.abort(_Stopped())
        self._thread.join()
        remove_tree(self.dest)

    def join(self) -> None:
        """The whole download was handed over: let the reader finish."""
        self._tar.finish()
        self._thread.join()


def download_and_extract(url: str, sha256: str, size: int, lib: str | os.PathLike[str], *, cache: Cache,
                         fetcher: Fetcher, progress: Progress | None = None, name: str | None = None,
                         limits: ExtractLimits | None = None, descend: bool = True,
                         phases: Phases | None = None) -> Download:
    """Download ``url`` into the cache, verified against ``sha256`` and ``size``, and extract it into
    ``lib`` (created if missing) in the same pass; ``extract_all``'s result, ``download``'s answer.

    Args:
        url, sha256, size: the archive and what it must be (both known: nothing unverified is used).
        lib: where the archive's content lands, as ``extract_all`` places it.
        cache, fetcher, progress, name: as ``download``.
        limits, descend: as ``extract_all``.
        phases: where the ``download`` and ``extract`` spans are recorded, if anywhere.

    Raises:
        VerificationError: the bytes are not the expected ones (whatever the extraction said of them).
        SizeExceeded, DownloadError: as ``download``; the partial download is not kept.
        UnsafeArchive, BadFile, ExtractFailed: the verified archive is refused, or the disk refused.
    """
    lib_s = os.path.abspath(os.fspath(lib))
    os.makedirs(lib_s, exist_ok=True)
    label = name or url.rstrip("/").rsplit("/", 1)[-1] or url
    tmp = os.path.join(os.path.dirname(lib_s), f".stream-{secrets.token_hex(8)}")
    pipeline = _Pipeline(label, tmp, size, limits, descend)
    pipeline.start()
    start = time.monotonic()
    try:
        got = download(url, sha256, size, cache=cache, fetcher=fetcher, progress=progress, name=name,
                       tee=pipeline.tee, keep_partial=False)
    except BaseException:
        pipeline.stop()
        raise
    finally:
        if phases is not None:
            phases.add("download", start, time.monotonic())
    try:
        pipeline.join()
    except BaseException:  # interrupted while the reader finishes: stop it before its files go
        pipeline.stop()
        raise
    try:
        if got.cached or pipeline.lost or pipeline.fed != got.size:
            remove_tree(tmp)
            with phase(phases, "extract"):
                extract_all([got.path], lib_s, limits=limits, descend=descend)
            return got
        if pipeline.error is not None:
            raise pipeline.error
        assert pipeline.root is not None
        try:
            merge_tree(pipeline.root, lib_s)
        except OSError as e:
            raise ExtractFailed(label, lib_s, e.strerror or str(e)) from e
        check_tree(lib_s, label)
        if phases is not None:
            phases.add("extract", pipeline.started or start, time.monotonic())
        return got
    finally:
        remove_tree(tmp)

