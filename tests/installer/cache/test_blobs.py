"""``installer/cache/blobs.py``: the content-addressed blobs, never handed out unless intact, never a link
followed, never written through one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from superfluid.installer.cache.blobs import is_sha256, sha256_file
from superfluid.installer.cache.stores import Cache

DATA = b"bundle bytes" * 100
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize(("value", "ok"), [(SHA, True), (SHA.upper(), False), ("sha256:" + SHA, False),
                                           (SHA[:-1], False), (SHA[:-1] + "g", False), ("", False)],
                         ids=["hex", "upper-case", "prefixed", "short", "not-hex", "empty"])
def test_is_sha256(value: str, ok: bool) -> None:
    assert is_sha256(value) is ok


def test_a_blob_is_stored_by_its_digest_and_found_intact(cache: Cache, tmp_path: Path) -> None:
    digest, path = cache.blobs.put_bytes(DATA)
    assert (digest, path) == (SHA, cache.blobs.folder / SHA) and sha256_file(path, chunk=7) == SHA
    assert cache.blobs.find_blob(SHA, size=len(DATA)) == path
    assert cache.blobs.read_blob(SHA, max_bytes=len(DATA)) == DATA
    src = tmp_path / "downloaded"
    src.write_bytes(b"other")
    other = hashlib.sha256(b"other").hexdigest()
    assert cache.blobs.add_blob(src, other) == cache.blobs.folder / other and not src.exists()


def test_a_local_file_is_kept_where_it_is_and_in_the_cache(cache: Cache, tmp_path: Path) -> None:
    src = tmp_path / "mirror" / "bundle.tar.gz"
    src.parent.mkdir()
    src.write_bytes(DATA)
    kept = cache.blobs.keep_copy(src, SHA)
    assert kept == cache.blobs.folder / SHA and kept.read_bytes() == DATA and src.read_bytes() == DATA
    assert [n for n in os.listdir(cache.blobs.folder) if n.startswith(".")] == []  # no temporary name left
    src.unlink()
    assert cache.blobs.find_blob(SHA, size=len(DATA)) == kept  # the folder moved: the cache still holds it
    assert cache.blobs.keep_copy(tmp_path / "gone", SHA) == kept  # one already there is kept as it is


@pytest.mark.parametrize(("damage", "size", "rehash"), [
    pytest.param(lambda p: p.write_bytes(DATA[:-1]), len(DATA), False, id="wrong-size"),
    pytest.param(lambda p: p.write_bytes(DATA[:-1] + b"X"), None, True, id="other-content"),
    pytest.param(lambda p: (p.unlink(), p.symlink_to(p.parent.parent / "elsewhere")), None, False, id="a-link"),
    pytest.param(lambda p: (p.unlink(), os.mkfifo(p)), None, False, id="a-fifo"),
])
def test_a_damaged_blob_is_removed_not_handed_out(cache: Cache, damage: object, size: int | None,
                                                  rehash: bool) -> None:
    _, path = cache.blobs.put_bytes(DATA)
    (cache.root / "elsewhere").write_bytes(DATA)
    damage(path)  # type: ignore[operator]
    assert cache.blobs.find_blob(SHA, size=size, rehash=rehash) is None
    assert not os.path.lexists(path) and (cache.root / "elsewhere").read_bytes() == DATA


def test_without_rehash_other_content_of_the_right_size_is_trusted(cache: Cache) -> None:
    _, path = cache.blobs.put_bytes(DATA)
    path.write_bytes(DATA[:-1] + b"X")
    assert cache.blobs.find_blob(SHA, size=len(DATA), rehash=False) == path
    assert cache.blobs.read_blob(SHA, max_bytes=len(DATA)) is None  # a small read is always checked
    assert cache.blobs.read_blob(hashlib.sha256(b"absent").hexdigest(), max_bytes=10) is None


def test_a_blob_larger_than_asked_is_not_read(cache: Cache) -> None:
    cache.blobs.put_bytes(DATA)
    assert cache.blobs.read_blob(SHA, max_bytes=len(DATA) - 1) is None


def test_blob_path_refuses_what_is_not_a_digest(cache: Cache) -> None:
    for bad in ("../../etc/passwd", SHA.upper(), ""):
        with pytest.raises(ValueError, match="not a SHA-256 hex digest"):
            cache.blobs.blob_path(bad)


@pytest.mark.parametrize("linked", ["", "sha256", "http", "partial"])
def test_the_cache_writes_nothing_through_a_link(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = Cache(tmp_path / "cache")
    where = cache.root / linked if linked else cache.root
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError, match="is a symbolic link"):
        cache.blobs.put_bytes(DATA)
    assert list(outside.iterdir()) == []
