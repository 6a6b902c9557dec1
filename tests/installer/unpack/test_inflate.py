"""The inflater and the hand-over between the two threads (``installer/unpack/inflate.py``).

Every test of the inflater runs twice: with ISA-L (python-isal, as installed) and with the standard
library's ``zlib`` forced (``engine`` fixture), the fallback where the wheel is missing; one test
forces it the way a machine without the wheel does, by an import that fails.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import subprocess
import sys
import tarfile
import threading
import zipfile
import zlib
from pathlib import Path

import pytest

from superfluid.installer.unpack import inflate
from superfluid.installer.unpack.inflate import Channel, Decompressor, Inflow

ROOT = Path(__file__).resolve().parents[3]


def _tar_gz(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _pour(chunks: list[bytes]) -> tuple[bytes, BaseException | None, list[bool]]:
    """Feed ``chunks`` through an ``Inflow`` on a second thread; answers what the reader read, the
    error it got (if any) and what each ``feed`` answered."""
    inflow = Inflow(capacity=1 << 20)
    answers: list[bool] = []

    def produce() -> None:
        for c in chunks:
            answers.append(inflow.feed(c))
        inflow.finish()

    t = threading.Thread(target=produce, name="producer")
    t.start()
    got, error = [], None
    try:
        while data := inflow.read(1 << 16):
            got.append(data)
    except BaseException as e:
        error = e
    inflow.cancel()
    t.join()
    return b"".join(got), error, answers


#: bytes of 16 symbols: about 2x smaller as gzip, as shared libraries are about 3x
_SIXTEEN = bytes(b"0123456789abcdef"[i % 16] for i in range(256))


def _compressible(n: int) -> bytes:
    return os.urandom(n).translate(_SIXTEEN)


def test_the_inflater_in_use_is_isal_where_installed() -> None:
    pytest.importorskip("isal")
    assert inflate.INFLATER.startswith("isal ") and "ISA-L" in inflate.INFLATER


def test_without_the_isal_wheel_the_standard_library_inflates(tmp_path: Path) -> None:
    """An import of isal that fails (no wheel for the platform): zlib, for gzip streams and zip
    members alike, and the extraction is the same."""
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_tar_gz({"pkg/lib.so": b"\x7fELF" + bytes(range(256)) * 400}))
    zipped = tmp_path / "b.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ggml.dll", b"MZ" + bytes(range(256)) * 400)
    script = (
        "import sys; sys.modules['isal'] = None\n"  # what an interpreter without the wheel finds
        "from superfluid.installer.unpack import inflate\n"
        "from superfluid.installer.unpack.extract import extract_archive\n"
        "assert inflate.isal_zlib is None, inflate.INFLATER\n"
        "print(inflate.INFLATER)\n"
        f"root = extract_archive({str(archive)!r}, {str(tmp_path / 'x')!r})\n"
        "print((root / 'lib.so').stat().st_size)\n"
        f"root = extract_archive({str(zipped)!r}, {str(tmp_path / 'y')!r})\n"
        "print((root / 'ggml.dll').stat().st_size)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("zlib ") and "isal is not installed" in lines[0]
    assert lines[1:] == [str(4 + 256 * 400), str(2 + 256 * 400)]


def test_gzip_and_raw_deflate_round_trip(engine: str) -> None:
    data = os.urandom(1 << 16) + bytes(1 << 20) + b"tail"
    d = inflate.gzip_inflater()
    assert d.decompress(gzip.compress(data)) == data and d.eof
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    d = inflate.raw_inflater()
    assert d.decompress(raw.compress(data) + raw.flush()) == data and d.eof
    assert inflate.crc32(data) == zlib.crc32(data)
    assert inflate.crc32(data[4:], inflate.crc32(data[:4])) == zlib.crc32(data)


def test_corrupt_deflate_raises_one_of_errors(engine: str) -> None:
    with pytest.raises(inflate.ERRORS):
        inflate.gzip_inflater().decompress(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 64)


@pytest.mark.parametrize("compress", ["gzip", "bz2", "xz"])
def test_the_decompressor_keeps_memory_bounded(compress: str, engine: str) -> None:
    """A bomb decompresses in steps of at most 1 MiB, however much a chunk expands to."""
    plain = bytes(32 << 20)
    if compress == "gzip":
        bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        data = bomb.compress(plain) + bomb.flush()
    else:
        data = bz2.compress(plain) if compress == "bz2" else lzma.compress(plain)
    d = Decompressor(data[:6])
    d.give(data)
    sizes: list[int] = []
    while not d.ended:
        assert not d.hungry
        sizes.append(len(d.take()))
        assert len(sizes) < 1000
    assert sum(sizes) == 32 << 20 and max(sizes) <= 1 << 20


@pytest.mark.parametrize("step", [1, 7, 4096, 1 << 20], ids=["byte-by-byte", "7", "4k", "1m"])
def test_an_inflow_hands_over_the_tar_whatever_the_chunks(step: int, engine: str) -> None:
    files = {"a": os.urandom(300_000), "b": bytes(2 << 20)}
    data = _tar_gz(files)
    chunks = [data[i:i + step] for i in range(0, len(data), step)] if step > 1 else [data[:5], data[5:6], data[6:]]
    got, error, answers = _pour(chunks)
    assert error is None and all(answers[:-1])
    with tarfile.open(fileobj=io.BytesIO(got)) as tar:
        assert {ti.name: tar.extractfile(ti).read() for ti in tar} == files  # type: ignore[union-attr]


def test_what_follows_the_compressed_stream_is_not_read(engine: str) -> None:
    data = _tar_gz({"a": b"1"})
    got, error, answers = _pour([data, b"trailing junk, never decompressed"])
    assert error is None and len(got) % 512 == 0
    with tarfile.open(fileobj=io.BytesIO(got)) as tar:
        assert [ti.name for ti in tar] == ["a"]


def test_once_the_stream_ended_a_feed_answers_false(engine: str) -> None:
    """A short stream is inflated as it is fed: the feed that reaches its end answers False."""
    inflow = Inflow()
    assert inflow.feed(_tar_gz({"a": b"1"})) is False
    assert inflow.feed(b"trailing junk") is False
    inflow.cancel()


def test_once_the_inflater_found_the_end_a_feed_answers_false(engine: str) -> None:
    """Inflated on its own thread, the producer is told before the reader reads the end."""
    data = gzip.compress(_compressible(10 << 20), mtime=0)
    inflow = Inflow()
    t = threading.Thread(target=lambda: [inflow.feed(c) for c in _chunks(data)])
    t.start()
    while inflow.read(1 << 16):
        pass
    t.join()
    assert inflow._thread is not None and inflow.feed(b"trailing junk") is False
    inflow.cancel()


def test_corrupt_data_reaches_the_reader_after_the_bytes_before_it(engine: str) -> None:
    """The producer does not raise: the reader gets what came out, then the inflater's error, and
    a feed after that answers False."""
    plain = os.urandom(3 << 20)
    good = gzip.compress(plain, mtime=0)
    bad = good[:len(good) // 2] + bytes(b ^ 0x55 for b in good[len(good) // 2:])
    got, error, answers = _pour([bad[i:i + 65536] for i in range(0, len(bad), 65536)])
    assert isinstance(error, inflate.ERRORS)
    assert len(got) > 1 << 20 and plain.startswith(got)
    assert answers[0]
    inflow = Inflow()
    inflow.feed(bad)
    with pytest.raises(inflate.ERRORS):
        while inflow.read(1 << 16):
            pass
    assert inflow.feed(b"more") is False


def _pour_watched(chunks: list[bytes], monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, BaseException | None, set[str]]:
    """As ``_pour``, answering the names of the threads that decompressed (``producer``,
    ``superfluid-inflate``, ``MainThread``: the reader)."""
    inflating: set[str] = set()
    take = Decompressor.take

    def watched(self: Decompressor) -> bytes:
        inflating.add(threading.current_thread().name)
        return take(self)

    monkeypatch.setattr(Decompressor, "take", watched)
    got, error, _ = _pour(chunks)
    return got, error, inflating


def _chunks(data: bytes, size: int = 1 << 20) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


_COMPRESS = {"gzip": lambda b: gzip.compress(b, mtime=0), "bz2": bz2.compress,
             "xz": lambda b: lzma.compress(b, preset=0)}


@pytest.mark.parametrize("compress", list(_COMPRESS))
def test_past_its_first_mib_a_stream_that_compresses_is_inflated_on_a_thread_of_its_own(
        compress: str, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer inflates the first ``_DECIDE`` bytes, the inflater thread the rest; the reader never."""
    plain = _compressible(10 << 20)
    got, error, inflating = _pour_watched(_chunks(_COMPRESS[compress](plain), 256 << 10), monkeypatch)
    assert error is None and got == plain
    assert inflating == {"producer", "superfluid-inflate"}


def test_a_gzip_stream_that_barely_compresses_is_inflated_by_the_reader(engine: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its first 4 MiB it is handed over compressed: the reader inflates it (a copy, made
    where the bytes are read next), and reads the same bytes; no third thread."""
    plain = os.urandom(12 << 20) + bytes(1 << 20)
    got, error, inflating = _pour_watched(_chunks(gzip.compress(plain, mtime=0)), monkeypatch)
    assert error is None and got == plain
    assert inflating == {"producer", "MainThread"}


def test_a_short_stream_is_inflated_by_the_producer(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _compressible(1 << 20)
    got, error, inflating = _pour_watched(_chunks(gzip.compress(plain, mtime=0), 64 << 10), monkeypatch)
    assert error is None and got == plain and inflating == {"producer"}


def test_an_uncompressed_tar_reaches_the_reader_as_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = gzip.decompress(_tar_gz({"a": os.urandom(6 << 20)}))
    got, error, inflating = _pour_watched(_chunks(raw, 1 << 20), monkeypatch)
    assert error is None and got == raw and "superfluid-inflate" not in inflating


def test_corrupt_data_trailing_junk_and_a_cut_stream(engine: str) -> None:
    plain = os.urandom(8 << 20)
    data = gzip.compress(plain, mtime=0)
    bad = data[:6 << 20] + bytes(b ^ 0x55 for b in data[6 << 20:])
    got, error, _ = _pour(_chunks(bad))
    assert isinstance(error, inflate.ERRORS) and plain.startswith(got)
    got, error, _ = _pour([*_chunks(data), b"trailing junk"])
    assert error is None and got == plain
    got, error, _ = _pour(_chunks(data[:-100]))  # cut: the tar reader sees the end early
    assert error is None and plain.startswith(got) and len(got) < len(plain)


@pytest.mark.parametrize("data", [b"", b"\x1f\x8b", b"junk!"], ids=["empty", "two-bytes-of-gzip", "five-bytes"])
def test_a_stream_too_short_to_tell_is_read_as_it_is(data: bytes) -> None:
    got, error, _ = _pour([data])
    assert (got, error) == (data, None)


def test_a_reader_that_is_gone_stops_the_inflating() -> None:
    inflow = Inflow(capacity=1 << 20)
    data = gzip.compress(bytes(8 << 20))
    inflow.cancel()
    assert inflow.feed(data) is False  # one step decompressed at most, nothing waits
    assert inflow.feed(b"more") is False


def test_a_reader_that_cancels_ends_the_inflater_waiting_for_input() -> None:
    """The inflater waits for the producer's next chunk; the reader cancels: the thread ends, it
    does not wait for a producer that may never come back."""
    inflow = Inflow(capacity=64 << 20)
    data = gzip.compress(_compressible(12 << 20), mtime=0)
    for c in _chunks(data[:5 << 20]):
        assert inflow.feed(c)
    assert inflow.read()
    inflow.cancel()
    assert inflow._thread is not None
    inflow._thread.join(5)
    assert not inflow._thread.is_alive()
    assert inflow.feed(b"more") is False


def test_abort_stops_the_reader_at_once() -> None:
    inflow = Inflow()
    inflow.feed(gzip.compress(b"x" * 100))
    inflow.abort(KeyError("stopped"))
    with pytest.raises(KeyError):
        inflow.read()


def test_a_file_that_cannot_be_read_is_the_readers_error() -> None:
    inflow = Inflow()
    inflow.feed(gzip.compress(os.urandom(1000))[:500])
    inflow.fail(OSError(5, "Input/output error"))
    assert len(inflow.read()) > 0
    with pytest.raises(OSError, match="Input/output"):
        inflow.read()


class TestChannel:
    def test_fail_comes_after_what_was_queued(self) -> None:
        c = Channel()
        assert c.put(b"a") and c.put(b"b")
        c.fail(ValueError("late"))
        assert c.get() == b"a" and c.get() == b"b"
        with pytest.raises(ValueError, match="late"):
            c.get()

    def test_abort_comes_before_what_was_queued(self) -> None:
        c = Channel()
        c.put(b"a")
        c.abort(ValueError("now"))
        with pytest.raises(ValueError, match="now"):
            c.get()
        assert c.put(b"b") is False

    def test_a_full_channel_waits_for_its_reader(self) -> None:
        c = Channel(capacity=4)
        assert c.put(b"1234")
        put = threading.Thread(target=c.put, args=(b"5",))
        put.start()
        put.join(0.05)
        assert put.is_alive()  # waiting: 4 bytes queued
        assert c.get() == b"1234"
        put.join(5)
        assert not put.is_alive() and c.get() == b"5"

    def test_cancel_frees_a_waiting_writer_and_drops_what_follows(self) -> None:
        c = Channel(capacity=1)
        c.put(b"x")
        answers: list[bool] = []
        put = threading.Thread(target=lambda: answers.append(c.put(b"y")))
        put.start()
        c.cancel()
        put.join(5)
        assert answers == [False] and c.put(b"z") is False

    def test_a_reader_waiting_on_a_cancelled_channel_gets_the_end(self) -> None:
        c = Channel()
        got: list[bytes] = []
        get = threading.Thread(target=lambda: got.append(c.get()))
        get.start()
        get.join(0.05)
        assert get.is_alive()  # waiting: nothing queued
        c.cancel()
        get.join(5)
        assert got == [b""]

    def test_the_end_is_an_empty_chunk(self) -> None:
        c = Channel()
        c.put(b"a")
        assert c.put(b"") is True  # never queued
        c.finish()
        assert c.get() == b"a" and c.get() == b"" and c.get() == b""
