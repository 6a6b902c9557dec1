"""Download and extract in one pass (``installer/unpack/stream.py``) against the loopback release server.

Each test asserts the typed outcome, what landed in ``lib/`` (nothing, on any failure), what the
cache holds (a verified blob or nothing; never a partial after a failure) and, where it matters,
whether the archive was extracted as it streamed or from the verified file afterwards.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import tarfile
from pathlib import Path

import pytest

from superfluid.installer.cache.download import download
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, VerificationError
from superfluid.installer.phases import Phases
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.installer.unpack import stream
from superfluid.installer.unpack.inflate import Inflow
from superfluid.installer.unpack.rules import ExtractLimits, UnsafeArchive
from superfluid.installer.unpack.stream import download_and_extract, streams
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.archives import HOSTILE, E, make_tar, snapshot
from tests.installer.conftest import REPO
from tests.release_server import ReleaseServer

NAME = "bundle-linux-x64-1.0.tar.gz"
BIG = os.urandom(3 << 20)  # incompressible: the archive is about as large as its content
ENTRIES = [E("dir", "pkg-1.0"), E("file", "pkg-1.0/libx.so", b"\x7fELF library", 0o755),
           E("symlink", "pkg-1.0/libx.so.1", "libx.so"), E("file", "pkg-1.0/kernels.bin", BIG)]


@pytest.fixture
def from_file(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The archives extracted from the verified file rather than as they streamed (a spy on
    ``extract_all``, which still runs)."""
    calls: list[object] = []
    real = stream.extract_all

    def spy(archives: list[object], *args: object, **kwargs: object) -> None:
        calls.extend(archives)
        real(archives, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stream, "extract_all", spy)
    return calls


def _publish(server: ReleaseServer, area: Path, entries: list[E], *, mode: str = "w:gz",
             name: str = NAME) -> tuple[str, str, bytes]:
    """Serve a tar of ``entries``; answers its URL, URL path and bytes."""
    data = make_tar(area / "built", entries, mode=mode).read_bytes()
    (area / "built").unlink()
    server.add_release(REPO, "v1", {name: data})
    return server.download_url(REPO, "v1", name), server.download_path(REPO, "v1", name), data


def _run(url: str, data: bytes, area: Path, cache: Cache, fetcher: RequestsFetcher, *, sha256: str | None = None,
         limits: ExtractLimits | None = None, phases: Phases | None = None) -> Path:
    lib = area / "staging" / "lib"
    download_and_extract(url, sha256 or hashlib.sha256(data).hexdigest(), len(data), lib, cache=cache,
                         fetcher=fetcher, name=NAME, limits=limits, phases=phases)
    return lib


def _nothing_kept(area: Path, cache: Cache) -> None:
    """No extracted file (``lib/`` empty, no ``.stream-`` directory), no partial download, no blob."""
    assert os.listdir(area / "staging") in ([], ["lib"])
    assert not (area / "staging" / "lib").exists() or os.listdir(area / "staging" / "lib") == []
    assert not list(cache.partials.folder.glob("*.partial")) and not list(cache.partials.folder.glob("*.json"))
    assert not cache.blobs.folder.exists() or os.listdir(cache.blobs.folder) == []
    assert (area / "outside" / "victim").read_text() == "precious\n"


def test_one_pass_lands_the_archive_and_the_verified_blob(release_server: ReleaseServer, area: Path, cache: Cache,
                                                          fetcher: RequestsFetcher, from_file: list[object]) -> None:
    url, _, data = _publish(release_server, area, ENTRIES)
    phases = Phases()
    lib = _run(url, data, area, cache, fetcher, phases=phases)
    snap = snapshot(lib)
    assert snap["libx.so"] == ("file", 12, 0o755, b"\x7fELF library") and snap["libx.so.1"] == ("link", "libx.so")
    assert (lib / "kernels.bin").read_bytes() == BIG
    assert os.listdir(area / "staging") == ["lib"]  # the stream's own directory is gone
    assert cache.blobs.blob_path(hashlib.sha256(data).hexdigest()).read_bytes() == data
    assert not list(cache.partials.folder.glob("*.partial"))
    assert from_file == [] and len(release_server.log) == 1
    spans = {name: (start, end) for name, start, end in phases.spans()}
    assert spans["extract"][0] < spans["download"][1]  # extraction ran while the bytes arrived


@pytest.mark.parametrize("mode", ["w", "w:xz", "w:bz2"], ids=["tar", "tar.xz", "tar.bz2"])
def test_other_compressions_stream_too(mode: str, release_server: ReleaseServer, area: Path, cache: Cache,
                                       fetcher: RequestsFetcher, from_file: list[object]) -> None:
    url, _, data = _publish(release_server, area, ENTRIES, mode=mode)
    lib = _run(url, data, area, cache, fetcher)
    assert (lib / "kernels.bin").read_bytes() == BIG and from_file == []


@pytest.mark.parametrize(("entries", "fragment"), HOSTILE)
def test_every_hostile_archive_is_refused_as_from_a_file(entries: list[E], fragment: str, release_server: ReleaseServer,
                                                         area: Path, cache: Cache, fetcher: RequestsFetcher) -> None:
    placed = [E(e.kind, e.name.format(area=area), e.data.format(area=area) if isinstance(e.data, str) else e.data,
                e.mode) for e in entries]
    url, _, data = _publish(release_server, area, placed)
    with pytest.raises(UnsafeArchive, match=fragment) as info:
        _run(url, data, area, cache, fetcher)
    assert info.value.path == NAME
    assert os.listdir(area / "staging") == ["lib"] and os.listdir(area / "staging" / "lib") == []
    assert (area / "outside" / "victim").read_text() == "precious\n"
    # the bytes are the release's (the digest matched): they stay cached, as a download's do
    assert cache.blobs.blob_path(hashlib.sha256(data).hexdigest()).is_file()


def test_a_bomb_is_refused_as_it_flows(release_server: ReleaseServer, area: Path, cache: Cache,
                                       fetcher: RequestsFetcher) -> None:
    archive = area / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        ti = tarfile.TarInfo("zeros")
        ti.size = 64 << 20
        tar.addfile(ti, io.BytesIO(bytes(ti.size)))
    data = archive.read_bytes()
    release_server.add_release(REPO, "v1", {NAME: data})
    with pytest.raises(UnsafeArchive, match="would unpack to more than"):
        _run(release_server.download_url(REPO, "v1", NAME), data, area, cache, fetcher,
             limits=ExtractLimits(max_ratio=20, ratio_floor=1 << 20))
    assert os.listdir(area / "staging" / "lib") == []


def test_corrupt_compressed_data_of_the_right_digest_is_a_bad_file(release_server: ReleaseServer, area: Path,
                                                                   cache: Cache, fetcher: RequestsFetcher) -> None:
    good = make_tar(area / "good.tar.gz", ENTRIES).read_bytes()
    data = good[:1000] + bytes(b ^ 0x55 for b in good[1000:5000]) + good[5000:]
    release_server.add_release(REPO, "v1", {NAME: data})
    with pytest.raises(BadFile, match="not a readable archive"):
        _run(release_server.download_url(REPO, "v1", NAME), data, area, cache, fetcher)
    assert os.listdir(area / "staging" / "lib") == []


def _compressible(seed: int, size: int) -> bytes:
    """Bytes of 16 symbols: about 2x smaller as gzip, so that 12 MiB of them pass the 4 MiB of gzip
    after which a stream that compresses is inflated on a thread of its own."""
    return random.Random(seed).randbytes(size).translate(bytes(b"0123456789abcdef"[i % 16] for i in range(256)))




#: archives past the point (4 MiB of gzip) where the pipeline decides which thread inflates: one
#: that barely compresses (handed over compressed: the extracting thread inflates it) and one that
#: compresses as libraries do (inflated on a thread of its own)
LARGE = {"incompressible": [E("dir", "pkg"), E("file", "pkg/noise.bin", os.urandom(9 << 20))],
         "libraries": [E("dir", "pkg"), *(E("file", f"pkg/lib{i}.so", _compressible(i, 4 << 20), 0o755)
                                          for i in range(3))]}


@pytest.mark.parametrize("kind", list(LARGE))
def test_a_large_archive_streams_whichever_thread_inflates(kind: str, release_server: ReleaseServer, area: Path,
                                                          cache: Cache, fetcher: RequestsFetcher,
                                                          from_file: list[object],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Inflow] = []

    class Watched(Inflow):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(stream, "Inflow", Watched)
    url, path, data = _publish(release_server, area, LARGE[kind])
    release_server.fault(path, "cut", after=len(data) * 2 // 3)  # and resumed past the decision
    lib = _run(url, data, area, cache, fetcher)
    for e in LARGE[kind][1:]:
        assert (lib / e.name.split("/", 1)[1]).read_bytes() == e.data
    assert from_file == [] and [r.status for r in release_server.log] == [200, 206]
    assert len(made) == 1
    if kind == "incompressible":
        assert made[0]._inflating and made[0]._thread is None
    else:
        assert not made[0]._inflating and made[0]._thread is not None


@pytest.mark.parametrize("kind", list(LARGE))
def test_corrupt_data_past_the_decision_is_a_bad_file(kind: str, release_server: ReleaseServer, area: Path,
                                                      cache: Cache, fetcher: RequestsFetcher) -> None:
    good = make_tar(area / "good.tar.gz", LARGE[kind]).read_bytes()
    at = len(good) * 3 // 4
    data = good[:at] + bytes(b ^ 0x55 for b in good[at:at + 4000]) + good[at + 4000:]
    release_server.add_release(REPO, "v1", {NAME: data})
    with pytest.raises(BadFile, match="not a readable archive"):
        _run(release_server.download_url(REPO, "v1", NAME), data, area, cache, fetcher)
    assert os.listdir(area / "staging" / "lib") == []


# --- bytes that are not the release's -----------------------------------------------------------------

def test_wrong_bytes_mid_stream_are_a_digest_error_and_nothing_is_kept(release_server: ReleaseServer, area: Path,
                                                                       cache: Cache, fetcher: RequestsFetcher) -> None:
    url, path, data = _publish(release_server, area, ENTRIES)
    release_server.fault(path, "wrong_bytes", after=len(data) // 2)  # inside kernels.bin: members already written
    with pytest.raises(VerificationError) as info:
        _run(url, data, area, cache, fetcher)
    assert info.value.expected == hashlib.sha256(data).hexdigest()
    _nothing_kept(area, cache)


def test_a_valid_archive_of_other_bytes_is_extracted_but_never_kept(release_server: ReleaseServer, area: Path,
                                                                    cache: Cache, fetcher: RequestsFetcher) -> None:
    url, _, data = _publish(release_server, area, ENTRIES)
    other = [E("file", "libx.so", b"\x7fELF not the release's library", 0o755)]
    impostor = make_tar(area / "impostor.tar.gz", other).read_bytes()
    (area / "impostor.tar.gz").unlink()
    release_server.add_asset(REPO, "v1", NAME, impostor)
    with pytest.raises(VerificationError, match="SHA-256"):
        download_and_extract(url, hashlib.sha256(data).hexdigest(), len(impostor), area / "staging" / "lib",
                             cache=cache, fetcher=fetcher, name=NAME)
    _nothing_kept(area, cache)


def test_a_hostile_archive_that_is_not_the_release_is_a_digest_error(release_server: ReleaseServer, area: Path,
                                                                      cache: Cache, fetcher: RequestsFetcher) -> None:
    url, _, data = _publish(release_server, area, ENTRIES)
    hostile = make_tar(area / "h.tar.gz", [E("file", "../escaped", "x")]).read_bytes()
    (area / "h.tar.gz").unlink()
    release_server.add_asset(REPO, "v1", NAME, hostile)
    with pytest.raises(VerificationError):  # not UnsafeArchive: the judge saw bytes the release never published
        download_and_extract(url, hashlib.sha256(data).hexdigest(), len(hostile), area / "staging" / "lib",
                             cache=cache, fetcher=fetcher, name=NAME)
    _nothing_kept(area, cache)
    assert not (area / "staging" / "escaped").exists()


# --- cut bodies, resumes, restarts --------------------------------------------------------------------

def test_a_cut_body_resumes_with_range_and_the_stream_goes_on(release_server: ReleaseServer, area: Path,
                                                              cache: Cache, fetcher: RequestsFetcher,
                                                              from_file: list[object]) -> None:
    url, path, data = _publish(release_server, area, ENTRIES)
    release_server.fault(path, "cut", after=len(data) // 3)
    lib = _run(url, data, area, cache, fetcher)
    assert (lib / "kernels.bin").read_bytes() == BIG and from_file == []
    assert [(r.status, r.header("Range")) for r in release_server.log] == [(200, None),
                                                                         (206, f"bytes={len(data) // 3}-")]


def test_a_cut_with_no_retry_left_keeps_only_the_bytes_received(release_server: ReleaseServer, area: Path,
                                                                cache: Cache) -> None:
    url, path, data = _publish(release_server, area, ENTRIES)
    release_server.fault(path, "cut", after=len(data) // 2)
    once = RequestsFetcher(FetchConfig(retries=0))
    with pytest.raises(DownloadError, match=f"after {len(data) // 2} bytes"):
        _run(url, data, area, cache, once)
    (partial,) = cache.partials.folder.glob("*.partial")  # for the next run to resume (issue 42, item 31)
    assert partial.read_bytes() == data[:len(data) // 2]
    partial.unlink()
    for record in cache.partials.folder.glob("*.json"):
        record.unlink()
    _nothing_kept(area, cache)  # no extracted file, no blob


def test_a_restart_from_byte_0_extracts_from_the_verified_file(release_server: ReleaseServer, area: Path,
                                                               cache: Cache, fetcher: RequestsFetcher,
                                                               from_file: list[object]) -> None:
    url, path, data = _publish(release_server, area, ENTRIES)
    release_server.fault(path, "cut", after=len(data) // 3)
    release_server.fault(path, "ignore_range")  # the resume is answered with the whole file
    lib = _run(url, data, area, cache, fetcher)
    assert (lib / "kernels.bin").read_bytes() == BIG
    assert from_file == [cache.blobs.blob_path(hashlib.sha256(data).hexdigest())]
    assert [r.status for r in release_server.log] == [200, 200]
    assert sorted(os.listdir(area / "staging")) == ["lib"]


def test_an_earlier_runs_partial_is_resumed_then_extracted_from_the_file(
        release_server: ReleaseServer, area: Path, cache: Cache, fetcher: RequestsFetcher,
        from_file: list[object]) -> None:
    url, path, data = _publish(release_server, area, ENTRIES)
    release_server.fault(path, "cut", after=100_000)
    with pytest.raises(DownloadError):  # a plain download keeps its partial for the next run
        download(url, hashlib.sha256(data).hexdigest(), len(data), cache=cache,
                 fetcher=RequestsFetcher(FetchConfig(retries=0)))
    lib = _run(url, data, area, cache, fetcher)
    assert (lib / "kernels.bin").read_bytes() == BIG and len(from_file) == 1
    assert release_server.log[-1].header("Range") == "bytes=100000-"


def test_a_cached_blob_needs_no_request(release_server: ReleaseServer, area: Path, cache: Cache,
                                        fetcher: RequestsFetcher, from_file: list[object]) -> None:
    url, _, data = _publish(release_server, area, ENTRIES)
    download(url, hashlib.sha256(data).hexdigest(), len(data), cache=cache, fetcher=fetcher)
    release_server.clear_log()
    lib = _run(url, data, area, cache, fetcher)
    assert (lib / "kernels.bin").read_bytes() == BIG and len(from_file) == 1 and release_server.log == []


@pytest.mark.parametrize(("name", "streamed"), [("a.tar.gz", True), ("a.tgz", True), ("a.tar.xz", True),
                                                ("a.tar", True), ("a.zip", False), ("A.ZIP", False)])
def test_which_names_stream(name: str, streamed: bool) -> None:
    assert streams(name) is streamed


@pytest.mark.parametrize("data", [b"", b"\x1f\x8b", b"junk!"], ids=["empty", "two-bytes-of-gzip", "five-bytes"])
def test_an_archive_too_short_to_tell_is_a_bad_file(data: bytes, release_server: ReleaseServer, area: Path,
                                                    cache: Cache, fetcher: RequestsFetcher) -> None:
    release_server.add_release(REPO, "v1", {NAME: data})
    with pytest.raises(BadFile, match="not a readable archive"):
        _run(release_server.download_url(REPO, "v1", NAME), data, area, cache, fetcher)
    assert os.listdir(area / "staging") == ["lib"] and os.listdir(area / "staging" / "lib") == []
