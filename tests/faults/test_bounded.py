"""Bounded waiting and malformed listings (issue 14, item 14): a server that stalls for good fails
after one overall deadline (not one stall timeout per attempt), and says so; a server that keeps
sending, however slowly, is not cut off by it; a release whose listing entry is malformed is
skipped with a warning naming it. Real HTTP on loopback, the real CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from superfluid.installer.cache.download import download
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from tests import cli
from tests.end_to_end import releases
from tests.faults.conftest import Home
from tests.release_server import ReleaseServer

DATA = bytes(range(256)) * 64  # 16 KiB


@pytest.fixture
def blob_server(release_server: ReleaseServer) -> ReleaseServer:
    """The loopback server with one release holding ``blob.bin`` (16 KiB)."""
    release_server.add_release(releases.REPO, "v9.9.9", {"blob.bin": DATA})
    return release_server


def _config(**over: float) -> FetchConfig:
    values: dict[str, float] = dict(stall_timeout=0.6, connect_timeout=0.6, patience=1.5, retries=4,
                                    backoff_base=0.1, backoff_max=0.2, stall_min_bytes=1)
    values.update(over)
    return FetchConfig(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("first", [0, 4096], ids=["stalls-before-a-byte", "stalls-for-good-mid-body"])
def test_a_server_that_stalls_for_good_costs_one_deadline(blob_server: ReleaseServer, tmp_path: Path,
                                                          first: int) -> None:
    path = blob_server.download_path(releases.REPO, "v9.9.9", "blob.bin")
    blob_server.fault(path, "stall", after=first, seconds=60, times=1)  # the first answer: `first` bytes, then nothing
    blob_server.fault(path, "stall", after=0, seconds=60, times=100)  # every later one: nothing at all
    fetcher = RequestsFetcher(_config())
    started = time.monotonic()
    with pytest.raises(DownloadError) as e:
        download(blob_server.download_url(releases.REPO, "v9.9.9", "blob.bin"), None, len(DATA),
                 cache=Cache(tmp_path / "cache"), fetcher=fetcher)
    took = time.monotonic() - started
    fetcher.close()
    # five attempts of 0.6 s and their waits would take over 3.2 s; the deadline is 1.5 s
    assert took < 2.8, took
    assert "gave up at the overall deadline of 1.5 s" in str(e.value)
    assert "attempts" in str(e.value)


def test_a_slow_steady_body_is_not_cut_off_by_the_deadline(blob_server: ReleaseServer, tmp_path: Path) -> None:
    """Each attempt brings bytes before it stalls: the deadline counts time without a byte, so the
    download resumes across attempts past the deadline and completes."""
    path = blob_server.download_path(releases.REPO, "v9.9.9", "blob.bin")
    for after in (4096, 8192, 12288):  # three cuts after a stall each, then the rest
        blob_server.fault(path, "stall", after=after, seconds=0.7, times=1)
    fetcher = RequestsFetcher(_config(stall_timeout=0.5, patience=1.2, retries=6))
    got = download(blob_server.download_url(releases.REPO, "v9.9.9", "blob.bin"), None, len(DATA),
                   cache=Cache(tmp_path / "cache"), fetcher=fetcher)
    fetcher.close()
    assert got.path.read_bytes() == DATA


def test_a_malformed_release_entry_is_skipped_with_a_warning_naming_it(tmp_path: Path, mirror_dir: Path) -> None:
    listing = mirror_dir / "basecompute" / "baseRT" / "releases.json"
    mirror = tmp_path / "mirror"
    import shutil

    shutil.copytree(mirror_dir, mirror)
    doc = json.loads(listing.read_text())
    doc.insert(0, {"tag_name": "v0.6.0", "name": "broken", "assets": None})
    (mirror / "basecompute" / "baseRT" / "releases.json").write_text(json.dumps(doc))
    home = Home(tmp_path / "home", cli.environment(tmp_path / "home"), mirror)
    home.path.mkdir()
    dry = home.sf("runtime", "install", "basert", "--mirror", str(mirror), "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    warnings = dry.json()["warnings"]
    assert len(warnings) == 1 and "release 'v0.6.0' ($[0]) skipped: $[0].assets: expected list" in warnings[0]
    run = home.sf("runtime", "install", "basert", "--mirror", str(mirror))
    assert run.code == 0, run.stderr
    assert "superfluid: warning: " in run.stderr and "release 'v0.6.0' ($[0]) skipped" in run.stderr
    assert (home.path / "runtimes" / "basert" / "0.4.0-cpu").is_dir()


def test_a_listing_of_a_million_releases_is_refused_within_seconds(tmp_path: Path) -> None:
    """Issue 36, item 5: a mirror whose releases.json lists 1,000,000 empty releases (3 MB) is refused
    at once, naming the file; it used to be read entry by entry, a warning each, for minutes."""
    mirror = tmp_path / "mirror"
    listing = mirror / releases.REPO / "releases.json"
    listing.parent.mkdir(parents=True)
    listing.write_text("[" + ",".join(["{}"] * 1_000_000) + "]")
    home = Home(tmp_path / "home", cli.environment(tmp_path / "home"), mirror)
    began = time.monotonic()
    run = home.sf("runtime", "install", "basert", "--mirror", str(mirror), timeout=30)
    assert time.monotonic() - began < 10
    assert run.code == 1, run.stderr
    assert "releases.json" in run.stderr and "1000000 releases" in run.stderr
    assert len(run.stderr.splitlines()) < 10  # no warning per entry
