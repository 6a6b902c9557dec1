"""``installer/cache``: the content-addressed blobs (never handed out unless intact, never a link
followed), the partial downloads held one at a time, and the HTTP cache keyed without credentials."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from superfluid.installer.cache.blobs import Cache, HttpEntry, is_sha256, sha256_file

DATA = b"bundle bytes" * 100
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize(("value", "ok"), [(SHA, True), (SHA.upper(), False), ("sha256:" + SHA, False),
                                           (SHA[:-1], False), (SHA[:-1] + "g", False), ("", False)],
                         ids=["hex", "upper-case", "prefixed", "short", "not-hex", "empty"])
def test_is_sha256(value: str, ok: bool) -> None:
    assert is_sha256(value) is ok


def test_for_home_is_the_homes_cache_folder(tmp_path: Path) -> None:
    c = Cache.for_home(tmp_path)
    assert (c.root, c.blob_dir, c.partial_dir, c.http_dir) == (
        tmp_path / "cache", tmp_path / "cache" / "sha256", tmp_path / "cache" / "partial", tmp_path / "cache" / "http")


def test_a_blob_is_stored_by_its_digest_and_found_intact(cache: Cache, tmp_path: Path) -> None:
    digest, path = cache.put_bytes(DATA)
    assert (digest, path) == (SHA, cache.blob_dir / SHA) and sha256_file(path, chunk=7) == SHA
    assert cache.find_blob(SHA, size=len(DATA)) == path and cache.read_blob(SHA, max_bytes=len(DATA)) == DATA
    src = tmp_path / "downloaded"
    src.write_bytes(b"other")
    other = hashlib.sha256(b"other").hexdigest()
    assert cache.add_blob(src, other) == cache.blob_dir / other and not src.exists()


@pytest.mark.parametrize(("damage", "size", "rehash"), [
    pytest.param(lambda p: p.write_bytes(DATA[:-1]), len(DATA), False, id="wrong-size"),
    pytest.param(lambda p: p.write_bytes(DATA[:-1] + b"X"), None, True, id="other-content"),
    pytest.param(lambda p: (p.unlink(), p.symlink_to(p.parent.parent / "elsewhere")), None, False, id="a-link"),
    pytest.param(lambda p: (p.unlink(), os.mkfifo(p)), None, False, id="a-fifo"),
])
def test_a_damaged_blob_is_removed_not_handed_out(cache: Cache, damage: object, size: int | None,
                                                  rehash: bool) -> None:
    _, path = cache.put_bytes(DATA)
    (cache.root / "elsewhere").write_bytes(DATA)
    damage(path)  # type: ignore[operator]
    assert cache.find_blob(SHA, size=size, rehash=rehash) is None
    assert not os.path.lexists(path) and (cache.root / "elsewhere").read_bytes() == DATA


def test_without_rehash_other_content_of_the_right_size_is_trusted(cache: Cache) -> None:
    _, path = cache.put_bytes(DATA)
    path.write_bytes(DATA[:-1] + b"X")
    assert cache.find_blob(SHA, size=len(DATA), rehash=False) == path
    assert cache.read_blob(SHA, max_bytes=len(DATA)) is None  # a small read is always checked
    assert cache.read_blob(hashlib.sha256(b"absent").hexdigest(), max_bytes=10) is None


def test_a_blob_larger_than_asked_is_not_read(cache: Cache) -> None:
    cache.put_bytes(DATA)
    assert cache.read_blob(SHA, max_bytes=len(DATA) - 1) is None


def test_blob_path_refuses_what_is_not_a_digest(cache: Cache) -> None:
    for bad in ("../../etc/passwd", SHA.upper(), ""):
        with pytest.raises(ValueError, match="not a SHA-256 hex digest"):
            cache.blob_path(bad)


@pytest.mark.parametrize("linked", ["", "sha256", "http", "partial"])
def test_the_cache_writes_nothing_through_a_link(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = Cache(tmp_path / "cache")
    where = cache.root / linked if linked else cache.root
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError, match="is a symbolic link"):
        cache.put_bytes(DATA)
    assert list(outside.iterdir()) == []


def test_partial_keys(cache: Cache) -> None:
    assert cache.partial_key(sha256=SHA, url="https://x/y") == f"sha256-{SHA}"
    by_url = cache.partial_key(sha256=None, url="https://u:p@x.test/y")
    assert by_url == cache.partial_key(sha256=None, url="https://x.test/y") != cache.partial_key(
        sha256=None, url="https://x.test/z")
    assert by_url.startswith("url-") and "p@" not in by_url


def test_a_partial_resumes_from_its_bytes_and_its_validator(cache: Cache) -> None:
    with cache.partial("k") as part:
        assert part.size() == 0 and part.validator() is None
        with part.open_for_write(0) as f:
            f.write(b"abc")
        part.set_validator(url="https://u:secret@x.test/y", etag='"e"', last_modified=None, total=10)
    with cache.partial("k") as part:
        assert part.size() == 3
        with part.open_for_write(3) as f:
            f.seek(3)
            f.write(b"def")
        assert part.path.read_bytes() == b"abcdef"
        assert part.validator() == {"url": "https://x.test/y", "etag": '"e"', "last_modified": None, "total": 10}
        part.discard()
        assert (part.size(), part.validator()) == (0, None)


@pytest.mark.parametrize("meta", [
    pytest.param({"etag": "e"}, id="no-url"),
    pytest.param({"url": "u", "total": "10"}, id="total-not-a-number"),
    pytest.param({"url": "u", "etag": 5}, id="etag-not-text"),
    pytest.param([1], id="not-an-object"),
])
def test_a_validator_not_ours_is_none(cache: Cache, meta: object) -> None:
    with cache.partial("k") as part:
        part.meta_path.write_text(json.dumps(meta))
        assert part.validator() is None


def test_a_link_at_a_partials_name_is_discarded_never_written_through(cache: Cache, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    with cache.partial("k") as part:
        part.path.symlink_to(victim)
        assert part.size() == 0 and not os.path.lexists(part.path)
        part.path.symlink_to(victim)
        with pytest.raises(OSError):
            part.open_for_write(3)
        with part.open_for_write(0) as f:  # a new file: what was planted is removed first
            f.write(b"new")
    assert victim.read_bytes() == b"precious"


def test_a_partial_is_held_by_one_at_a_time(cache: Cache) -> None:
    import fcntl

    with cache.partial("k") as part:
        fd = os.open(part.cache.partial_dir / "k.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # another process's flock would wait
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(cache.partial_dir / "k.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on leaving
    finally:
        os.close(fd)


def test_something_planted_at_the_locks_name_is_replaced(cache: Cache, tmp_path: Path) -> None:
    cache.partial_dir.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (cache.partial_dir / "k.lock").symlink_to(victim)
    with cache.partial("k"):
        assert not (cache.partial_dir / "k.lock").is_symlink()
    assert victim.read_bytes() == b"precious"


def test_the_http_cache_is_keyed_and_kept_without_credentials(cache: Cache) -> None:
    entry = cache.put_http_body("https://u:secret@api.test/releases?page=2", b'[{"tag": "v1"}]', etag='W/"1"',
                                link_next="https://u:secret@api.test/releases?page=3")
    assert (entry.url, entry.link_next, entry.etag) == ("https://api.test/releases?page=2",
                                                        "https://api.test/releases?page=3", 'W/"1"')
    assert cache.http_entry("https://api.test/releases?page=2") == entry
    assert cache.http_body(entry, max_bytes=100) == b'[{"tag": "v1"}]'
    stored = b"".join(p.read_bytes() for p in cache.http_dir.iterdir())
    assert b"secret" not in stored
    cache.drop_http("https://api.test/releases?page=2")
    assert cache.http_entry("https://api.test/releases?page=2") is None
    cache.drop_http("https://api.test/never")  # forgetting what was never kept is no error


def test_an_entry_for_another_url_is_not_answered(cache: Cache) -> None:
    cache.put_http_body("https://api.test/a", b"x")
    (path,) = cache.http_dir.iterdir()
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "url": "https://api.test/b"}))
    assert cache.http_entry("https://api.test/a") is None


@pytest.mark.parametrize(("doc", "ok"), [
    pytest.param({"url": "u", "sha256": SHA, "size": 3}, True, id="minimal"),
    pytest.param({"url": "u", "sha256": SHA, "size": "3"}, True, id="size-as-text"),
    pytest.param({"url": "u", "sha256": SHA}, False, id="no-size"),
    pytest.param({"url": "u", "sha256": "x", "size": 3}, False, id="not-a-digest"),
    pytest.param({"url": "u", "sha256": SHA, "size": 3, "stored_at": "then"}, False, id="bad-time"),
    pytest.param(["u"], False, id="not-an-object"),
])
def test_http_entry_from_json(doc: object, ok: bool) -> None:
    entry = HttpEntry.from_json(doc)
    assert (entry is not None) is ok
    if entry is not None:
        assert HttpEntry.from_json(entry.to_json()) == entry
