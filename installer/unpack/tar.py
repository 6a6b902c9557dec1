"""The tar reader: a tar's members in one pass, front to back, from a file or as its bytes arrive.

See docs/install.md, "One pass".
"""

from __future__ import annotations

import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import IO, cast

from superfluid.installer.unpack.inflate import Inflow
from superfluid.installer.unpack.rules import Defence, Member, Members, Opener, UnsafeArchive

__all__ = ["tar_members"]

_CHUNK = 1 << 20  # bytes read at a time


def _tar_kind(ti: tarfile.TarInfo) -> str:
    if ti.isreg():
        return "file"
    for kind, test in (("dir", ti.isdir), ("symlink", ti.issym), ("hardlink", ti.islnk),
                       ("chardev", ti.ischr), ("blockdev", ti.isblk), ("fifo", ti.isfifo)):
        if test():
            return kind
    return "other"


def _tar_defence(archive: str, dest: str, ti: tarfile.TarInfo) -> Defence | None:
    """Python's own ``data`` filter, run after our rule has passed a member (defence in depth)."""
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        return None

    def defend() -> None:
        try:
            data_filter(ti, dest)
        except tarfile.FilterError as e:
            raise UnsafeArchive(archive, f"is refused by Python's tarfile data filter ({e})",
                                member=ti.name) from e

    return defend


class _Forward:
    """A tar arriving as a stream, as tarfile's reader of files sees it: ``read``, and
    ``seek``/``tell`` that only ever move forward (by skipping); ``take`` hands a member's bytes
    over in the pieces they arrived in. tarfile's own stream mode ("r|") copies every byte through
    two buffers and ``extractfile`` through two more; a member written from ``take`` is not copied."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._chunk = b""
        self._at = 0  # in _chunk
        self._pos = 0  # in the archive

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0 or pos < self._pos:
            raise tarfile.ReadError("it goes back to an earlier member, which a stream cannot")
        while self._pos < pos and self._next(pos - self._pos):
            self._skip(min(pos - self._pos, len(self._chunk) - self._at))
        return self._pos

    def _next(self, want: int) -> bool:
        """Whether bytes are available (reading the next chunk when the last is used up)."""
        if self._at < len(self._chunk):
            return True
        self._chunk, self._at = self._stream.read(max(want, _CHUNK)), 0
        return bool(self._chunk)

    def _skip(self, n: int) -> None:
        self._at += n
        self._pos += n

    def read(self, n: int = -1) -> bytes:
        parts = []
        while (n < 0 or n > 0) and self._next(n):
            take = len(self._chunk) - self._at if n < 0 else min(n, len(self._chunk) - self._at)
            whole = self._at == 0 and take == len(self._chunk)
            parts.append(self._chunk if whole else self._chunk[self._at:self._at + take])
            self._skip(take)
            n -= take if n > 0 else 0
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def take(self, limit: int) -> memoryview:
        """The next at most ``limit`` bytes as they arrived, without a copy (empty at the end)."""
        if limit <= 0 or not self._next(limit):
            return memoryview(b"")
        take = min(limit, len(self._chunk) - self._at)
        piece = memoryview(self._chunk)[self._at:self._at + take]
        self._skip(take)
        return piece


class _Content:
    """A regular member's bytes, in the pieces they arrived in from a ``_Forward`` (what
    ``extractfile`` answers, without its copies)."""

    def __init__(self, source: _Forward, offset: int, size: int) -> None:
        self._source, self._offset, self._left = source, offset, size

    def pieces(self) -> Iterator[memoryview]:
        if self._source.tell() != self._offset:
            self._source.seek(self._offset)
        while self._left and (piece := self._source.take(self._left)):
            self._left -= len(piece)
            yield piece

    def __enter__(self) -> _Content:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def tar_members(archive: str, dest: str, stream: IO[bytes] | None = None) -> Members:
    """The members of the tar ``archive`` in archive order, in one pass, front to back, whatever the
    compression; each passed member is checked again by Python's ``data`` filter against ``dest``.

    ``stream``: the tar's bytes as they arrive, already decompressed (``archive`` only names it);
    without it, the file is decompressed on a second thread as it is read (``_inflowing``). Either
    is read through a ``_Forward``, which only ever moves forward as tarfile's stream mode does.

    Raises:
        tarfile.TarError, EOFError, a decompressor's error: the archive is broken, found as it is read.
        UnsafeArchive: from a member's defence, when it is run.
    """
    with _inflowing(archive) if stream is None else nullcontext(stream) as source:
        forward = _Forward(source)
        with tarfile.open(fileobj=cast("IO[bytes]", forward), mode="r:") as tar:
            for ti in tar:
                member = Member(ti.name, _tar_kind(ti), ti.size, ti.mode, ti.linkname)
                opener = _tar_opener(tar, forward, ti) if member.kind == "file" else None
                yield member, opener, _tar_defence(archive, dest, ti)


@contextmanager
def _inflowing(archive: str) -> Iterator[IO[bytes]]:
    """The tar in the file ``archive``, decompressed (gzip, bzip2, xz or none, by its first bytes)
    by a second thread as it reads the file, while this one reads the tar: the two cores of a
    streamed install (``stream``), for an archive already on disk (a cached or resumed download,
    a restore, ``--from``)."""
    f = open(archive, "rb")  # closed below, once the thread is done with it
    inflow = Inflow()

    def produce() -> None:
        try:
            while chunk := f.read(_CHUNK):
                if not inflow.feed(chunk):
                    return
            inflow.finish()
        except BaseException as e:  # the file could not be read: the reader's error, in its turn
            inflow.fail(e)

    thread = threading.Thread(target=produce, name="superfluid-inflate", daemon=True)
    thread.start()
    try:
        yield cast("IO[bytes]", inflow)
    finally:
        inflow.cancel()
        thread.join()
        f.close()


def _tar_opener(tar: tarfile.TarFile, forward: _Forward, ti: tarfile.TarInfo) -> Opener:
    if not ti.issparse():
        return lambda: cast("IO[bytes]", _Content(forward, ti.offset_data, ti.size))
    return lambda: cast("IO[bytes]", tar.extractfile(ti))
