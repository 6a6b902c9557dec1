"""Download one asset into the content-addressed cache, verified in the same pass.

See docs/install.md, "Verifying".
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from superfluid.installer.cache.blobs import is_sha256
from superfluid.installer.cache.partials import Partial
from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import DownloadError, SizeExceeded, VerificationError
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import FetchResponse
from superfluid.installer.transport.progress import Progress, TerminalProgress, progress_for
from superfluid.runtime.kernel.redact import redact_url

__all__ = [
    "Download",
    "Tee",
    "Wanted",
    "download",
    "download_many",
    "Progress",
    "TerminalProgress",
    "progress_for",
]

log = logging.getLogger(__name__)

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")

#: ``(offset, chunk)``: a chunk of a download as it is written and hashed (see ``download``'s ``tee``)
Tee = Callable[[int, bytes], None]


@dataclass(frozen=True, slots=True)
class Download:
    """A verified file in the cache."""

    url: str
    path: Path  # $SUPERFLUID_HOME/cache/sha256/<sha256>; read it, never move or edit it
    sha256: str  # computed (equal to the expected digest when one was given)
    size: int  # bytes
    cached: bool  # True when no transfer was needed


@dataclass(frozen=True, slots=True)
class Wanted:
    """One asset of a plan to download: where from, and what it must be."""

    url: str
    sha256: str | None = None  # expected hex digest, or None to accept and report what arrives
    size: int | None = None  # declared bytes: the cap, and checked at the end
    name: str | None = None  # shown in progress; defaults to the URL's last segment


class _Cancelled(DownloadError):
    def __init__(self, url: str) -> None:
        super().__init__(url, "cancelled because another download of the same plan failed")


def download(
    url: str,
    sha256: str | None = None,
    size: int | None = None,
    *,
    cache: Cache,
    fetcher: Fetcher,
    progress: Progress | None = None,
    name: str | None = None,
    cancel: threading.Event | None = None,
    tee: Tee | None = None,
) -> Download:
    """Fetch ``url`` into the cache, verified against ``sha256`` and ``size`` when given.

    Args:
        url: where the bytes come from (``https://``, loopback ``http://``, a named mirror, ``file://``).
        sha256: expected hex digest; ``None`` accepts whatever arrives and reports its digest.
        size: declared bytes; the download is capped at it and must end at it.
        cache: the content-addressed cache to fill.
        fetcher: the network seam.
        progress: where to report bytes (silent by default).
        name: shown in progress (default: the URL's last segment).
        cancel: set by a sibling download that failed; stops this one between chunks.
        tee: called with ``(offset, chunk)`` for every chunk as it is written and hashed, so that
            another consumer (``stream``'s extraction) reads the same bytes in the same pass. A
            resume continues at the offset where the partial ends; a restart begins again at 0.

    Returns:
        The verified blob: its path in the cache, digest and size.

    Raises:
        VerificationError: the bytes (size or digest) are not the expected ones; nothing was kept.
        SizeExceeded: more bytes than ``size`` (or than the configured cap when no size is given).
        DownloadError: the transfer failed after the configured retries (``DownloadStalled``,
            ``RateLimited`` are kinds of it).
        ValueError: ``sha256`` is not a hex digest or ``size`` is negative.
    """
    if sha256 is not None:
        sha256 = sha256.lower()
        if not is_sha256(sha256):
            raise ValueError(f"expected SHA-256 is not 64 hex digits: {sha256!r}")
    if size is not None and size < 0:
        raise ValueError(f"declared size is negative: {size!r}")
    progress = progress or Progress()
    name = name or url.rstrip("/").rsplit("/", 1)[-1] or url
    hit = _cached(url, sha256, size, cache, fetcher)
    if hit is not None:
        return hit
    with cache.partials.partial(cache.partials.partial_key(sha256=sha256, url=url)) as part:
        hit = _cached(url, sha256, size, cache, fetcher)  # another process may have finished it
        if hit is not None:
            return hit
        job = _Job(url, sha256, size, cache, fetcher, part, progress, name, cancel, tee)
        try:  # a failure (a cut body, Ctrl-C) keeps the bytes received for the next run to resume
            return fetcher.retry(url, job.attempt)
        finally:
            progress.finish(name)


def _cached(url: str, sha256: str | None, size: int | None, cache: Cache, fetcher: Fetcher) -> Download | None:
    if sha256 is None:
        return None
    path = cache.blobs.find_blob(sha256, size=size, rehash=fetcher.config.rehash_cached)
    if path is None:
        return None
    log.debug("%s: cached as %s", url, path)
    return Download(url, path, sha256, path.stat().st_size, cached=True)


def _strong_etag(value: str | None) -> str | None:
    return value if value and not value.startswith("W/") else None


class _Job:
    """One download's state across attempts (see the module docstring for the rule)."""

    def __init__(
        self,
        url: str,
        sha256: str | None,
        size: int | None,
        cache: Cache,
        fetcher: Fetcher,
        part: Partial,
        progress: Progress,
        name: str,
        cancel: threading.Event | None,
        tee: Tee | None = None,
    ) -> None:
        self.url, self.sha256, self.size = url, sha256, size
        self.cache, self.fetcher, self.part = cache, fetcher, part
        self.progress, self.name, self.cancel = progress, name, cancel
        self.tee = tee
        self.cap = size if size is not None else fetcher.config.max_download_bytes
        self._hasher: Any = None
        self._hashed = 0  # bytes of the partial the hasher has seen

    def attempt(self, number: int) -> Download:
        if self.cancel is not None and self.cancel.is_set():
            raise _Cancelled(self.url)
        have, validator = self._resumable()
        if have and validator is not None and have == (self.size if self.size is not None else validator["total"]):
            try:  # complete from an earlier run that stopped before the rename
                return self._finish(have)
            except VerificationError:
                log.info("%s: the complete partial from an earlier run is not the file; fetching again", self.url)
                have, validator = 0, None  # _finish discarded it
        headers = {"Accept-Encoding": "identity"}
        if have and validator is not None:
            headers["Range"] = f"bytes={have}-"
            headers["If-Range"] = validator["etag"] or validator["last_modified"]
            log.info("%s: resuming at byte %d", self.url, have)
        with self.fetcher.open(self.url, headers, max_bytes=self.cap, accept=(416,)) as r:
            offset = self._start(r, have, validator)
            return self._receive(r, offset)

    def _resumable(self) -> tuple[int, dict[str, Any] | None]:
        """Bytes of the partial that may be resumed and their validator; discards the rest."""
        have = self.part.size()
        if not have:
            return 0, None
        v = self.part.validator()
        ok = (
            v is not None
            and v.get("url") == redact_url(self.url)
            and (_strong_etag(v.get("etag")) or v.get("last_modified"))
            and have <= self.cap
            and (v.get("total") is None or have <= v["total"])
        )
        if not ok:
            log.info("%s: discarding %d partial bytes without a usable validator", self.url, have)
            self.part.discard()
            return 0, None
        assert v is not None
        return have, {"etag": _strong_etag(v.get("etag")), "last_modified": v.get("last_modified"),
                      "total": v.get("total")}

    def _start(self, r: FetchResponse, have: int, validator: dict[str, Any] | None) -> int:
        """Check the answer against the partial; answers the byte offset the body starts at."""
        if r.status == 416:
            self.part.discard()
            raise DownloadError(self.url, "the server refused the resume range; restarting", retryable=True)
        if r.status == 206:
            if not have or validator is None or not self._valid_206(r, have, validator):
                self.part.discard()
                raise DownloadError(self.url, "invalid partial answer (206) to a resume; restarting", retryable=True)
            self.progress.start(self.name, self.size, done=have)
            return have
        if r.status != 200:
            raise DownloadError(self.url, f"unexpected HTTP {r.status} for a download", status=r.status)
        if have:
            log.info("%s: the server sent the whole file (200); restarting from byte 0", self.url)
        total = _int(r.headers.get("content-length"))
        self._check_total(total)
        self.part.discard()
        self.part.set_validator(
            url=self.url,
            etag=_strong_etag(r.headers.get("etag")),
            last_modified=r.headers.get("last-modified"),
            total=total,
        )
        self.progress.start(self.name, self.size if self.size is not None else total)
        return 0

    def _valid_206(self, r: FetchResponse, have: int, v: dict[str, Any]) -> bool:
        m = _CONTENT_RANGE.fullmatch(r.headers.get("content-range", "").strip())
        if not m:
            return False
        first, last, total = (int(g) for g in m.groups())
        if first != have or last != total - 1 or (v["total"] is not None and total != v["total"]):
            return False
        if self.size is not None and total != self.size:
            return False
        if v["etag"]:
            return bool(r.headers.get("etag") == v["etag"])
        return bool(r.headers.get("last-modified") == v["last_modified"])

    def _check_total(self, total: int | None) -> None:
        if total is None or self.size is None or total == self.size:
            return
        self.part.discard()
        if total > self.size:
            raise SizeExceeded(self.url, self.size, total)
        raise VerificationError(self.url, "size", str(self.size), str(total))

    def _hasher_at(self, offset: int) -> Any:
        """A SHA-256 state covering exactly the first ``offset`` bytes of the partial.

        Kept across attempts, so a resumed body is hashed once; re-read from disk only when the
        partial is not the one this job wrote (an earlier run's, or a failed write).
        """
        if offset == 0 or self._hashed != offset or self._hasher is None:
            self._hasher = hashlib.sha256()
            self._hashed = 0
            if offset:
                with open(self.part.path, "rb") as f:
                    while self._hashed < offset and (block := f.read(min(1 << 20, offset - self._hashed))):
                        self._hasher.update(block)
                        self._hashed += len(block)
        return self._hasher

    def _receive(self, r: FetchResponse, offset: int) -> Download:
        received = offset
        h = self._hasher_at(offset)
        written_behind = offset  # bytes the disk was asked to write so far (see _write_behind)
        with self.part.open_for_write(offset) as f:
            f.seek(offset)
            if os.fstat(f.fileno()).st_size > offset:  # only then: ext4 writes out a file truncated to 0 when
                f.truncate()  # it is closed, and the receipt's fsync waited for it (~0.3 s, 210 MB: auto_da_alloc)
            for chunk in r:
                received += len(chunk)
                if received > self.cap:
                    f.close()
                    self.part.discard()
                    raise SizeExceeded(self.url, self.cap, received)
                f.write(chunk)
                h.update(chunk)
                self._hashed = received
                if self.tee is not None:
                    self.tee(received - len(chunk), chunk)
                self.progress.advance(self.name, len(chunk))
                if self.cancel is not None and self.cancel.is_set():
                    raise _Cancelled(self.url)
                if self.fetcher.config.fsync and received - written_behind >= _WRITE_BEHIND:
                    f.flush()
                    _write_behind(f.fileno(), written_behind, received - written_behind)
                    written_behind = received
            if self.fetcher.config.fsync:
                f.flush()
                os.fsync(f.fileno())
        if self.size is not None and received < self.size:
            raise DownloadError(
                self.url, f"the body ended after {received} of {self.size} bytes", retryable=True
            )
        return self._finish(received)

    def _finish(self, received: int) -> Download:
        """Compare size and digest, and move the partial into the cache (or discard it)."""
        digest = self._hasher_at(received).hexdigest()
        if self.size is not None and received != self.size:
            self.part.discard()
            raise VerificationError(self.url, "size", str(self.size), str(received))
        if self.sha256 is not None and digest != self.sha256:
            self.part.discard()
            raise VerificationError(self.url, "sha256", self.sha256, digest)
        validator = self.part.validator() or {}
        path = self.cache.blobs.add_blob(self.part.path, digest)
        self.part.discard()
        self.cache.http.put_http(
            self.url, sha256=digest, size=received,
            etag=validator.get("etag"), last_modified=validator.get("last_modified"),
        )
        log.debug("%s: verified %s (%d bytes)", self.url, digest, received)
        return Download(self.url, path, digest, received, cached=False)


_WRITE_BEHIND = 16 << 20  # bytes written before the disk is asked to start writing them out
_sync_file_range: Any = None  # libc's, once looked up (False: there is none)


def _write_behind(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing these bytes to disk now, without waiting for it (Linux's
    ``sync_file_range``), so that the ``fsync`` before a download enters the cache finds most of
    the file written already: on a streamed install that ``fsync`` is on the way to the probe
    (measured: ~60 ms for 210 MB, ~8 ms with this). Nothing where there is no such call, or when it
    fails: the ``fsync`` still makes the file durable."""
    global _sync_file_range
    if _sync_file_range is None:
        _sync_file_range = False
        if sys.platform.startswith("linux"):
            try:
                call = ctypes.CDLL(None, use_errno=True).sync_file_range
                call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                call.restype = ctypes.c_int
                _sync_file_range = call
            except (OSError, AttributeError):
                pass
    if _sync_file_range:
        _sync_file_range(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE: start, do not wait


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def download_many(
    wanted: Sequence[Wanted],
    *,
    cache: Cache,
    fetcher: Fetcher,
    progress: Progress | None = None,
) -> list[Download]:
    """Download every asset of a plan, ``fetcher.config.parallel`` at a time; answers in order.

    The first failure cancels the others (between chunks) and is raised once all have stopped.

    Raises:
        VerificationError, DownloadError: the first failure, in plan order.
    """

    progress = progress or Progress()
    cancel = threading.Event()

    def one(w: Wanted) -> Download:
        try:
            return download(w.url, w.sha256, w.size, cache=cache, fetcher=fetcher,
                            progress=progress, name=w.name, cancel=cancel)
        except BaseException:
            cancel.set()
            raise

    workers = max(1, min(fetcher.config.parallel, len(wanted)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="superfluid-download")
    try:
        futures = [pool.submit(one, w) for w in wanted]
        wait(futures)
    except BaseException:  # Ctrl-C: stop the others between chunks instead of finishing them
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    errors = [f.exception() for f in futures]
    real = [e for e in errors if e is not None and not isinstance(e, _Cancelled)]
    if real or any(errors):
        raise (real or [e for e in errors if e is not None])[0]
    return [f.result() for f in futures]
