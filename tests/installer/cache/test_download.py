"""Downloads against the loopback release server: each fault of SPEC §8.1 is one test.

Every test asserts the typed outcome, what is on disk (blob, partial) and, through the server's
request log, what was asked.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from pathlib import Path

import pytest

from superfluid.installer.cache.download import (
    Progress,
    TerminalProgress,
    Wanted,
    download,
    download_many,
    progress_for,
)
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, DownloadStalled, SizeExceeded, VerificationError
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from tests.installer.conftest import REPO
from tests.release_server import ReleaseServer
from tests.settings_from import settings_from

NAME = "basert-engine-linux-x64-0.4.0.tar.gz"
DATA = os.urandom(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def bundle_server(release_server: ReleaseServer) -> ReleaseServer:
    """The loopback server with one release holding one bundle, ``NAME`` (``DATA``)."""
    release_server.add_release(REPO, "v0.4.0", {NAME: DATA})
    return release_server


@pytest.fixture
def url(bundle_server: ReleaseServer) -> str:
    return bundle_server.download_url(REPO, "v0.4.0", NAME)


@pytest.fixture
def path(bundle_server: ReleaseServer) -> str:
    return bundle_server.download_path(REPO, "v0.4.0", NAME)


def leftovers(cache: Cache) -> list[str]:
    """Files in the cache other than lock files."""
    if not cache.root.exists():
        return []
    return sorted(str(p.relative_to(cache.root)) for p in cache.root.rglob("*") if p.is_file()
                  and not p.name.endswith(".lock"))


def test_verified_into_the_content_addressed_cache(url: str, cache: Cache, fetcher: RequestsFetcher,
                                                   bundle_server: ReleaseServer) -> None:
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path == cache.root / "sha256" / SHA and d.path.read_bytes() == DATA
    assert (d.sha256, d.size, d.cached) == (SHA, len(DATA), False)
    assert not list(cache.partials.folder.glob("*.partial"))
    assert bundle_server.log[0].header("Accept-Encoding") == "identity"


def test_a_cached_blob_costs_no_request(url: str, cache: Cache, fetcher: RequestsFetcher,
                                        bundle_server: ReleaseServer) -> None:
    download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    bundle_server.clear_log()
    again = download(url, SHA.upper(), None, cache=cache, fetcher=fetcher)
    assert again.cached and again.path.read_bytes() == DATA and bundle_server.log == []


def test_a_damaged_cached_blob_is_fetched_again(url: str, cache: Cache, fetcher: RequestsFetcher,
                                                bundle_server: ReleaseServer) -> None:
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    d.path.write_bytes(b"\0" + DATA[1:])
    again = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert not again.cached and again.path.read_bytes() == DATA


def test_without_an_expected_digest_the_computed_one_is_reported(url: str, cache: Cache,
                                                                 fetcher: RequestsFetcher) -> None:
    d = download(url, None, None, cache=cache, fetcher=fetcher)
    assert d.sha256 == SHA and d.path.read_bytes() == DATA
    entry = cache.http.http_entry(url)
    assert entry is not None and entry.sha256 == SHA


def test_body_cut_midway_resumes_with_a_valid_206(url: str, path: str, cache: Cache, fetcher: RequestsFetcher,
                                                  bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "cut", after=100_000)
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA
    first, second = bundle_server.log
    assert first.status == 200 and first.header("Range") is None
    assert second.status == 206 and second.header("Range") == "bytes=100000-"
    assert second.header("If-Range") == f'"{SHA[:32]}"'


def test_body_cut_twice_resumes_twice(url: str, path: str, cache: Cache, fetcher: RequestsFetcher,
                                      bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "cut", after=50_000)
    bundle_server.fault(path, "cut", after=70_000)
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA
    assert [r.header("Range") for r in bundle_server.log] == [None, "bytes=50000-", "bytes=120000-"]


def test_server_ignoring_range_restarts_cleanly(url: str, path: str, cache: Cache, fetcher: RequestsFetcher,
                                                bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "cut", after=100_000)
    bundle_server.fault(path, "ignore_range")
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA
    assert [r.status for r in bundle_server.log] == [200, 200]


def test_a_206_starting_elsewhere_is_not_trusted(url: str, path: str, cache: Cache, fetcher: RequestsFetcher,
                                                 bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "cut", after=100_000)
    bundle_server.fault(path, "bad_range")
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA
    assert [(r.status, r.header("Range")) for r in bundle_server.log] == [(200, None), (206, "bytes=100000-"),
                                                                          (200, None)]


def test_partial_from_an_earlier_run_resumes(url: str, path: str, cache: Cache, fast: FetchConfig,
                                             bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "cut", after=120_000)
    once = RequestsFetcher(FetchConfig(retries=0, stall_timeout=2))
    with pytest.raises(DownloadError, match="connection broken after 120000 bytes"):
        download(url, SHA, len(DATA), cache=cache, fetcher=once)
    assert [p.stat().st_size for p in cache.partials.folder.glob("*.partial")] == [120_000]
    d = download(url, SHA, len(DATA), cache=cache, fetcher=RequestsFetcher(fast))
    assert d.path.read_bytes() == DATA and bundle_server.log[-1].header("Range") == "bytes=120000-"


def test_partial_of_a_replaced_file_is_not_spliced(url: str, path: str, cache: Cache, fast: FetchConfig,
                                                   bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "cut", after=120_000)
    with pytest.raises(DownloadError):
        download(url, None, None, cache=cache, fetcher=RequestsFetcher(FetchConfig(retries=0)))
    new = os.urandom(len(DATA))
    bundle_server.add_asset(REPO, "v0.4.0", NAME, new)  # upstream replaced the asset: its ETag changed
    d = download(url, None, None, cache=cache, fetcher=RequestsFetcher(fast))
    assert d.path.read_bytes() == new and d.sha256 == hashlib.sha256(new).hexdigest()
    assert bundle_server.log[-1].status == 200  # If-Range failed: the whole new file, not a splice


def test_5xx_then_success(url: str, path: str, cache: Cache, fetcher: RequestsFetcher,
                          bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "status", status=503, times=2)
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA and [r.status for r in bundle_server.log] == [503, 503, 200]


def test_429_is_retried_after_retry_after(url: str, path: str, cache: Cache, fetcher: RequestsFetcher,
                                          bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "rate_limit", status=429, seconds=1, retry_after=True)
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA
    first, second = bundle_server.log
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 1.0


def test_wrong_bytes_are_refused_naming_both_digests_and_nothing_kept(
        url: str, path: str, cache: Cache, fetcher: RequestsFetcher, bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "wrong_bytes")
    wrong = hashlib.sha256(bytes([DATA[0] ^ 0xFF]) + DATA[1:]).hexdigest()
    with pytest.raises(VerificationError) as e:
        download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert (e.value.expected, e.value.got, e.value.what) == (SHA, wrong, "sha256")
    assert f"SHA-256 {wrong}, expected {SHA}" in str(e.value)
    assert leftovers(cache) == [] and len(bundle_server.log) == 1


def test_stall_times_out_with_a_clear_error(url: str, path: str, cache: Cache, bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "stall", after=1000, seconds=30, times=5)
    f = RequestsFetcher(FetchConfig(retries=1, stall_timeout=0.5, backoff_base=0.01))
    started = time.monotonic()
    with pytest.raises(DownloadStalled) as e:
        download(url, SHA, len(DATA), cache=cache, fetcher=f)
    assert time.monotonic() - started < 5
    assert "no data for 0.5 s after" in str(e.value) and "stall timeout" in str(e.value)
    assert "gave up after 2 attempts" in str(e.value) and e.value.attempts == 2


def test_stall_then_recovery_resumes(url: str, path: str, cache: Cache, bundle_server: ReleaseServer) -> None:
    bundle_server.fault(path, "stall", after=10_000, seconds=30)
    f = RequestsFetcher(FetchConfig(retries=2, stall_timeout=0.5, backoff_base=0.01))
    d = download(url, SHA, len(DATA), cache=cache, fetcher=f)
    assert d.path.read_bytes() == DATA and bundle_server.log[-1].header("Range") == "bytes=10000-"


def test_size_cap_is_the_declared_size(url: str, cache: Cache, fetcher: RequestsFetcher,
                                       bundle_server: ReleaseServer) -> None:
    with pytest.raises(SizeExceeded) as e:
        download(url, SHA, 1000, cache=cache, fetcher=fetcher)
    assert e.value.limit == 1000 and leftovers(cache) == []


def test_size_cap_without_a_declared_size_is_the_configured_bound(url: str, cache: Cache,
                                                                  bundle_server: ReleaseServer) -> None:
    with pytest.raises(SizeExceeded):
        download(url, None, None, cache=cache, fetcher=RequestsFetcher(FetchConfig(max_download_bytes=4096)))
    assert leftovers(cache) == []


def test_shorter_than_declared_is_refused(url: str, cache: Cache, fetcher: RequestsFetcher) -> None:
    with pytest.raises(VerificationError, match=f"{len(DATA)} bytes, expected {len(DATA) + 1}"):
        download(url, None, len(DATA) + 1, cache=cache, fetcher=fetcher)
    assert leftovers(cache) == []


def test_not_found(bundle_server: ReleaseServer, cache: Cache, fetcher: RequestsFetcher) -> None:
    with pytest.raises(DownloadError, match="HTTP 404") as e:
        download(bundle_server.download_url(REPO, "v0.4.0", "nope"), SHA, None, cache=cache, fetcher=fetcher)
    assert e.value.status == 404 and len(bundle_server.log) == 1


def test_object_store_redirect(object_store_server: ReleaseServer, cache: Cache, fetcher: RequestsFetcher) -> None:
    object_store_server.add_release(REPO, "v0.4.0", {NAME: DATA})
    object_store_server.fault(object_store_server.object_path(DATA), "cut", after=5000)
    d = download(object_store_server.download_url(REPO, "v0.4.0", NAME), SHA, len(DATA), cache=cache,
                 fetcher=fetcher)
    assert d.path.read_bytes() == DATA
    assert [(r.server, r.status) for r in object_store_server.log] == [("api", 302), ("objects", 200),
                                                                       ("api", 302), ("objects", 206)]


def test_bad_arguments(cache: Cache, fetcher: RequestsFetcher) -> None:
    with pytest.raises(ValueError, match="64 hex"):
        download("https://x.test/a", "abc", None, cache=cache, fetcher=fetcher)
    with pytest.raises(ValueError, match="negative"):
        download("https://x.test/a", None, -1, cache=cache, fetcher=fetcher)


class TestMany:
    def _publish(self, server: ReleaseServer, n: int) -> list[tuple[str, bytes]]:
        files = [(f"part-{i}.bin", os.urandom(50_000 + i)) for i in range(n)]
        server.add_release(REPO, "v1", dict(files))
        return files

    def test_in_parallel_answers_in_order(self, release_server: ReleaseServer, cache: Cache,
                                          fetcher: RequestsFetcher) -> None:
        files = self._publish(release_server, 6)
        for name, _ in files:
            release_server.fault(release_server.download_path(REPO, "v1", name), "stall", after=1, seconds=0.3)
        wanted = [Wanted(release_server.download_url(REPO, "v1", n), hashlib.sha256(b).hexdigest(), len(b), n)
                  for n, b in files]
        started = time.monotonic()
        got = download_many(wanted, cache=cache, fetcher=fetcher)
        elapsed = time.monotonic() - started
        assert [d.path.read_bytes() for d in got] == [b for _, b in files]
        assert elapsed < 6 * 0.3  # 4 at a time: two rounds of 0.3 s stalls, not six

    def test_one_wrong_fails_the_plan_and_leaves_no_unverified_bytes(self, release_server: ReleaseServer,
                                                                    cache: Cache, fetcher: RequestsFetcher) -> None:
        files = self._publish(release_server, 3)
        release_server.fault(release_server.download_path(REPO, "v1", files[1][0]), "wrong_bytes")
        wanted = [Wanted(release_server.download_url(REPO, "v1", n), hashlib.sha256(b).hexdigest(), len(b), n)
                  for n, b in files]
        with pytest.raises(VerificationError, match=files[1][0]):
            download_many(wanted, cache=cache, fetcher=fetcher)
        for p in cache.blobs.folder.glob("*"):
            assert hashlib.sha256(p.read_bytes()).hexdigest() == p.name
        assert not list(cache.partials.folder.glob(f"sha256-{hashlib.sha256(files[1][1]).hexdigest()}.partial"))

    def test_same_file_twice_at_once_is_fetched_once(self, url: str, cache: Cache, fetcher: RequestsFetcher,
                                                     bundle_server: ReleaseServer) -> None:
        got = download_many([Wanted(url, SHA, len(DATA))] * 2, cache=cache, fetcher=fetcher)
        assert [d.path for d in got] == [cache.blobs.blob_path(SHA)] * 2
        assert sorted(d.cached for d in got) == [False, True] and len(bundle_server.log) == 1


class TestProgress:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    @pytest.mark.parametrize(
        ("env", "json_mode", "tty", "bar"),
        [({}, False, True, True), ({"CI": "true"}, False, True, False), ({}, True, True, False),
         ({}, False, False, False), ({"CI": ""}, False, True, True)],
        ids=["terminal", "ci", "json", "not-a-tty", "ci-empty-is-unset"],
    )
    def test_when_a_bar_shows(self, env: dict[str, str], json_mode: bool, tty: bool, bar: bool) -> None:
        stream = self.Tty() if tty else io.StringIO()
        p = progress_for(stream, mode=settings_from(env, json_mode=json_mode).progress)
        assert isinstance(p, TerminalProgress) is bar and isinstance(p, Progress)

    def test_bar_reports_bytes(self, url: str, cache: Cache, fetcher: RequestsFetcher) -> None:
        stream = self.Tty()
        download(url, SHA, len(DATA), cache=cache, fetcher=fetcher, progress=TerminalProgress(stream, interval=0,
                                                                                              width=120))
        out = stream.getvalue()
        # a 300 kB file is counted in kB (issue 15); the bar fills, then is cleared for the next line
        assert f"{NAME}  [####################] 100%  300.0/300.0 kB" in out
        assert out.endswith("\r\x1b[K")


def test_concurrent_processes_share_one_partial(url: str, home: Path, bundle_server: ReleaseServer) -> None:
    """Two downloaders of the same content (threads standing in for processes: the lock is flock)
    end with one verified blob and one transfer."""
    results: list[object] = []

    def run() -> None:
        f = RequestsFetcher(FetchConfig())
        results.append(download(url, SHA, len(DATA), cache=Cache.for_home(home), fetcher=f))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len(bundle_server.log) == 1


def test_an_empty_asset(release_server: ReleaseServer, cache: Cache, fetcher: RequestsFetcher) -> None:
    release_server.add_release(REPO, "v1", {"empty": b""})
    empty = hashlib.sha256(b"").hexdigest()
    d = download(release_server.download_url(REPO, "v1", "empty"), empty, 0, cache=cache, fetcher=fetcher)
    assert (d.sha256, d.size, d.path.read_bytes()) == (empty, 0, b"")


def test_a_complete_partial_of_other_bytes_is_fetched_again(url: str, cache: Cache, fetcher: RequestsFetcher,
                                                            bundle_server: ReleaseServer) -> None:
    """An earlier run wrote every byte, then died before verifying: the bytes are checked, not trusted."""
    with cache.partials.partial(cache.partials.partial_key(sha256=SHA, url=url)) as part:
        part.path.write_bytes(b"\0" * len(DATA))
        part.set_validator(url=url, etag=f'"{SHA[:32]}"', last_modified=None, total=len(DATA))
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA and [r.header("Range") for r in bundle_server.log] == [None]


def test_a_complete_partial_that_verifies_needs_no_request(url: str, cache: Cache, fetcher: RequestsFetcher,
                                                           bundle_server: ReleaseServer) -> None:
    with cache.partials.partial(cache.partials.partial_key(sha256=SHA, url=url)) as part:
        part.path.write_bytes(DATA)
        part.set_validator(url=url, etag=f'"{SHA[:32]}"', last_modified=None, total=len(DATA))
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA and bundle_server.log == []


@pytest.mark.parametrize(
    "meta",
    ['{"url": 1}', '{"url": "U", "total": "many", "etag": "\\"e\\""}', "[]", "not json", '{"url": "U"}'],
    ids=["url-type", "total-type", "not-object", "not-json", "no-validator"],
)
def test_a_partial_with_a_broken_record_restarts(url: str, cache: Cache, fetcher: RequestsFetcher,
                                                 bundle_server: ReleaseServer, meta: str) -> None:
    with cache.partials.partial(cache.partials.partial_key(sha256=SHA, url=url)) as part:
        part.path.write_bytes(DATA[:1000])
        part.meta_path.write_text(meta.replace('"U"', f'"{url}"'))
    d = download(url, SHA, len(DATA), cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == DATA and [r.header("Range") for r in bundle_server.log] == [None]


@pytest.mark.parametrize("fsync", [False, True])
def test_a_download_is_flushed_to_disk_only_when_configured(bundle_server: ReleaseServer, cache: Cache, fsync: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a blob enters the cache unflushed (a torn one fails its re-hash and is fetched
    again); ``fsync=True`` flushes it, with write-behind along the way (the body passes 16 MiB)."""
    data = os.urandom(20 << 20)
    bundle_server.add_release(REPO, "v9", {"big.tar.gz": data})
    flushed: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (flushed.append(fd), real(fd))[1])
    fetcher = RequestsFetcher(FetchConfig(fsync=fsync))
    assert FetchConfig().fsync is False and FetchConfig().rehash_cached is True
    d = download(bundle_server.download_url(REPO, "v9", "big.tar.gz"), hashlib.sha256(data).hexdigest(), len(data),
                 cache=cache, fetcher=fetcher)
    assert d.path.read_bytes() == data
    assert bool(flushed) is fsync
