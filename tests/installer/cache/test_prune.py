"""The cache by kind and its prune (installer/cache/prune.py), and the lock protocol that keeps what a
running process holds (installer/cache/holds.py): the rules as tables, then a cache built by hand
and pruned, with a live partial download and a live process holding blobs."""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from superfluid.installer.cache.holds import HOLDS, held_now
from superfluid.installer.cache.prune import (
    blob_kind,
    human_age,
    human_bytes,
    is_archive,
    is_stale,
    parse_age,
    prune,
    scan,
)
from superfluid.installer.cache.stores import Cache
from superfluid.installer.home.gc import in_use


def _tar() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("x")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return raw.getvalue()


@pytest.mark.parametrize(("head", "archive"), [
    pytest.param(gzip.compress(b"x"), True, id="gzip"),
    pytest.param(b"\xfd7zXZ\x00rest", True, id="xz"),
    pytest.param(b"BZh91AY&SY", True, id="bzip2"),
    pytest.param(b"\x28\xb5\x2f\xfd....", True, id="zstd"),
    pytest.param(b"PK\x03\x04....", True, id="zip-wheel"),
    pytest.param(_tar(), True, id="plain-tar"),
    pytest.param(b'[{"tag_name": "v0.4.0"}]', False, id="a-listing-page"),
    pytest.param(b"a" * 64 + b"  basert.tar.gz\n", False, id="a-sha256-file"),
    pytest.param(b"1\n", False, id="an-abi-asset"),
    pytest.param(b"", False, id="empty"),
])
def test_is_archive(head: bytes, archive: bool) -> None:
    assert is_archive(head[:512]) is archive


@pytest.mark.parametrize(("needed", "archive", "kind"), [
    (True, True, "in_use"), (True, False, "in_use"), (False, True, "unused"), (False, False, "http")])
def test_blob_kind(needed: bool, archive: bool, kind: str) -> None:
    assert blob_kind(needed=needed, archive=archive) == kind


DAY = 86400.0

#: (kind, keywords, is it stale?)
STALE = [
    pytest.param("unused", dict(age=31 * DAY, grace=30 * DAY), True, id="unused-past-the-grace"),
    pytest.param("unused", dict(age=29 * DAY, grace=30 * DAY), False, id="unused-within-the-grace"),
    pytest.param("unused", dict(age=0.0, grace=0.0), True, id="grace-0s-takes-all-that-was-before"),
    pytest.param("unused", dict(age=0.0, grace=0.0, born_before=False), False, id="written-during-the-prune"),
    pytest.param("unused", dict(age=99 * DAY, grace=0.0, held=True), False, id="held-by-a-running-install"),
    pytest.param("in_use", dict(age=999 * DAY, grace=0.0), False, id="in-use-never"),
    pytest.param("http", dict(age=99 * DAY, grace=0.0, named=True), False, id="the-http-caches-last-answer-stays"),
    pytest.param("http", dict(age=99 * DAY, grace=30 * DAY), True, id="an-http-body-no-record-names"),
    pytest.param("partial", dict(age=99 * DAY, grace=30 * DAY), True, id="a-partial-nobody-writes"),
    pytest.param("partial", dict(age=99 * DAY, grace=0.0, held=True), False, id="a-live-download-never"),
    pytest.param("other", dict(age=999 * DAY, grace=0.0), False, id="other-never"),
]


@pytest.mark.parametrize(("kind", "facts", "stale"), STALE)
def test_is_stale(kind: str, facts: dict[str, object], stale: bool) -> None:
    assert is_stale(kind, **facts) is stale  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "seconds"), [("0s", 0), ("90s", 90), ("5m", 300), ("12h", 43200),
                                                ("30d", 30 * DAY), ("2w", 14 * DAY)])
def test_parse_age(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "1.5d", "-1d", "30 d", "30days", "３0d", "1y"])
def test_parse_age_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not an age"):
        parse_age(text)


def test_words() -> None:
    assert [human_bytes(n) for n in (0, 999, 12_300, 1_200_000, 3_400_000_000)] == \
        ["0 B", "999 B", "12.3 kB", "1.2 MB", "3.4 GB"]
    assert [human_age(s) for s in (3, 300, 7200, DAY, 3 * DAY)] == ["3 s", "5 min", "2 h", "1 day", "3 days"]


# --- a cache built by hand ----------------------------------------------------------------------------

def _blob(cache: Cache, data: bytes, *, age: float = 0.0) -> str:
    """A blob written as another process wrote it (``put_bytes`` would hold it for this one)."""
    digest = hashlib.sha256(data).hexdigest()
    cache.blobs.folder.mkdir(parents=True, exist_ok=True)
    cache.partials.folder.mkdir(parents=True, exist_ok=True)
    cache.http.folder.mkdir(parents=True, exist_ok=True)
    path = cache.blobs.blob_path(digest)
    path.write_bytes(data)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))
    return digest


def _receipt(home: Path, install: str, digest: str) -> None:
    path = home / "runtimes" / "basert" / install
    path.mkdir(parents=True)
    doc = {"schema": "superfluid-runtime/1", "id": "basert", "install": install, "version": install.split("-")[0],
           "backend": "cpu", "worker": "bin/superfluid-worker-basert", "tested": True,
           "sources": [{"url": f"https://x.invalid/{install}.tar.gz", "sha256": digest}]}
    (path / "runtime.json").write_text(json.dumps(doc))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Cache, dict[str, str]]:
    """A home with one install, and a cache holding: its archive, a removed install's archive, an
    archive named only by a lock, a listing page its record names, an older page no record names,
    and a partial nobody writes; all two days old."""
    home = tmp_path / "home"
    cache = Cache.for_home(home)
    old = 2 * DAY
    names = {
        "current": _blob(cache, gzip.compress(b"current engine"), age=old),
        "removed": _blob(cache, gzip.compress(b"removed engine" * 50), age=old),
        "locked": _blob(cache, gzip.compress(b"locked engine"), age=old),
        "page": _blob(cache, b'[{"tag_name": "v0.4.0"}]', age=old),
        "old-page": _blob(cache, b'[{"tag_name": "v0.3.1"}]', age=old),
    }
    entry = cache.http.put_http("https://api.invalid/releases", sha256=names["page"], size=24)
    stale = cache.http.put_http("https://x.invalid/removed.tar.gz", sha256=names["removed"], size=1)
    t = time.time() - old
    for e in (entry, stale):
        os.utime(cache.http._entry_path(e.url), (t, t))
    _receipt(home, "0.4.0-cpu", names["current"])
    (cache.partials.folder / "sha256-dead.partial").write_bytes(b"x" * 100)
    (cache.partials.folder / "sha256-dead.json").write_text("{}")
    for p in cache.partials.folder.iterdir():
        os.utime(p, (t, t))
    return home, cache, names


def test_du_by_kind(built: tuple[Path, Cache, dict[str, str]]) -> None:
    home, cache, names = built
    found = scan(cache.root, in_use(str(home)), keep={"fleet.lock": {names["locked"]}})
    kinds = {i.path: i.kind for i in found.items}
    assert kinds[f"sha256/{names['current']}"] == kinds[f"sha256/{names['locked']}"] == "in_use"
    assert kinds[f"sha256/{names['removed']}"] == "unused"
    assert kinds[f"sha256/{names['page']}"] == kinds[f"sha256/{names['old-page']}"] == "http"
    assert kinds["partial/sha256-dead.json"] == "partial"  # with its .partial: one item, two files
    by = found.by_kind()
    assert by["partial"] == {"bytes": 102, "files": 2}
    assert by["http"]["files"] == 4  # two bodies, two records
    assert found.installs == 1 and found.total()["files"] == sum(k["files"] for k in by.values())
    assert not any(i.stale for i in found.items)  # no grace given: nothing is stale


def test_prune_removes_what_nothing_needs_and_keeps_the_rest(built: tuple[Path, Cache, dict[str, str]]) -> None:
    home, cache, names = built
    before = sorted(p.name for p in cache.blobs.folder.iterdir())
    dry = prune(cache.root, in_use(str(home)), grace=DAY, dry_run=True, keep={"fleet.lock": {names["locked"]}})
    assert sorted(p.name for p in cache.blobs.folder.iterdir()) == before  # a dry run changes nothing
    done = prune(cache.root, in_use(str(home)), grace=DAY, keep={"fleet.lock": {names["locked"]}})
    assert [i.path for i in dry.removed] == [i.path for i in done.removed]
    assert sorted(i.path for i in done.removed) == sorted([
        f"sha256/{names['removed']}", f"sha256/{names['old-page']}", "partial/sha256-dead.json",
        "http/" + os.path.basename(cache.http._entry_path("https://x.invalid/removed.tar.gz"))])
    left = sorted(p.name for p in cache.blobs.folder.iterdir())
    assert left == sorted([names["current"], names["locked"], names["page"]])
    assert cache.http.http_entry("https://api.invalid/releases") is not None  # what --offline reads stays
    assert cache.http.http_entry("https://x.invalid/removed.tar.gz") is None  # went with its blob
    assert list(cache.partials.folder.iterdir()) == []
    assert done.freed == sum(i.size for i in done.removed)
    # without the lock, its archive is unused too
    again = prune(cache.root, in_use(str(home)), grace=DAY)
    assert [i.path for i in again.removed] == [f"sha256/{names['locked']}"]


def test_within_the_grace_nothing_goes(built: tuple[Path, Cache, dict[str, str]]) -> None:
    home, cache, _ = built
    assert prune(cache.root, in_use(str(home)), grace=30 * DAY).removed == ()


def test_a_live_download_keeps_its_partial(built: tuple[Path, Cache, dict[str, str]]) -> None:
    home, cache, _ = built
    with cache.partials.partial("sha256-live") as part:
        with part.open_for_write(0) as f:
            f.write(b"half")
        t = time.time() - 2 * DAY
        os.utime(part.path, (t, t))
        done = prune(cache.root, in_use(str(home)), grace=0.0)
        assert "partial/sha256-live.partial" not in {i.path for i in done.removed}
        assert part.path.exists()
    # the download is gone (the flock with it): the next prune may take it
    done = prune(cache.root, in_use(str(home)), grace=0.0)
    assert "partial/sha256-live.lock" in {i.path for i in done.removed}
    assert not part.path.exists() and not (cache.partials.folder / "sha256-live.lock").exists()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from superfluid.installer.cache.stores import Cache
    cache = Cache(sys.argv[1])
    assert cache.blobs.find_blob(sys.argv[2]) is not None
    Path(sys.argv[3]).write_text("held")
    time.sleep(60)
""")


def test_a_running_process_keeps_what_it_holds(built: tuple[Path, Cache, dict[str, str]], tmp_path: Path) -> None:
    home, cache, names = built
    marker = tmp_path / "held"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(cache.root), names["removed"], str(marker)])
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        assert names["removed"] in held_now(cache.root)
        done = prune(cache.root, in_use(str(home)), grace=0.0)
        assert f"sha256/{names['removed']}" not in {i.path for i in done.removed}
        assert cache.blobs.blob_path(names["removed"]).exists()
    finally:
        proc.kill()
        proc.wait()
    # killed: its record's flock is free, so it holds nothing; the next prune removes both
    assert names["removed"] not in held_now(cache.root)
    done = prune(cache.root, in_use(str(home)), grace=0.0)
    assert f"sha256/{names['removed']}" in {i.path for i in done.removed}
    assert [p.name for p in (cache.root / HOLDS).iterdir()] == []


def test_a_blob_is_held_before_it_is_looked_up_and_touched_when_used(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    digest = _blob(cache, gzip.compress(b"engine"), age=3 * DAY)
    assert cache.blobs.find_blob(digest) is not None
    assert time.time() - os.stat(cache.blobs.blob_path(digest)).st_mtime < 60  # last used now
    (record,) = (cache.root / HOLDS).iterdir()
    assert digest in record.read_text().split()
    fd = os.open(record, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):  # its owner (this process) holds it
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert hashlib.sha256(cache.blobs.blob_path(digest).read_bytes()).hexdigest() == digest
