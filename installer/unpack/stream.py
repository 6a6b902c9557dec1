"""One pass from the network into the staging directory: downloaded, hashed and extracted at once.

See docs/install.md, "One pass".
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from superfluid.installer.cache.download import Download, Progress, download
from superfluid.installer.files import remove_tree
from superfluid.installer.phases import Phases, phase
from superfluid.installer.unpack.extract import extract_all, extract_archive
from superfluid.installer.unpack.inflate import Inflow
from superfluid.installer.unpack.rules import ExtractLimits, check_tree
from superfluid.installer.unpack.writer import ExtractFailed, merge_tree

if TYPE_CHECKING:
    from superfluid.installer.cache.stores import Cache
    from superfluid.installer.transport.fetcher import Fetcher

__all__ = ["download_and_extract", "streams"]

_ZIP_NAMES = (".zip",)


def streams(name: str) -> bool:
    """Whether an archive of this file name can be extracted as it downloads: a tar of any
    compression, not a zip (whose directory sits at its end)."""
    return not name.lower().endswith(_ZIP_NAMES)


class _Stopped(Exception):
    """The pipeline was stopped from outside (the download failed or lost its place)."""


class _Pipeline:
    """Decompress what ``tee`` receives, in the downloading thread, and hand the tar to a second
    thread, which reads it, judges every member and writes and hashes every file (see the module
    doc, and ``Inflow`` for why the work is cut there)."""

    def __init__(self, label: str, dest: str, size: int, limits: ExtractLimits | None, descend: bool) -> None:
        self.label, self.dest, self.size, self.limits, self.descend = label, dest, size, limits, descend
        self.fed = 0  # bytes handed to the pipeline, contiguous from byte 0
        self.lost = False  # the download left the pipeline's place: extract from the file instead
        self.root: Path | None = None
        self.error: BaseException | None = None
        self._feeding = True  # False once the reader is gone or the tar's stream ended: hash only
        self._tar = Inflow()
        self._thread = threading.Thread(target=self._extract, name="superfluid-extract", daemon=True)

    @property
    def started(self) -> float:
        """time.monotonic() when the first bytes reached the tar reader (0.0 before)."""
        return self._tar.started

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
            self._feeding = self._tar.feed(chunk)

    def _extract(self) -> None:
        try:
            self.root = extract_archive(self.label, self.dest, limits=self.limits, descend=self.descend,
                                        stream=cast("IO[bytes]", self._tar), size=self.size)
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
        SizeExceeded, DownloadError: as ``download``; the bytes received stay in the partial download
            for the next run to resume (as they do when the process is interrupted).
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
                       tee=pipeline.tee)
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

