"""``installer/cache/partials.py``: the partial downloads, keyed without credentials, held one at a time,
never a link written through."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

import pytest

from superfluid.installer.cache.stores import Cache

SHA = hashlib.sha256(b"bundle bytes" * 100).hexdigest()


def test_partial_keys(cache: Cache) -> None:
    assert cache.partials.partial_key(sha256=SHA, url="https://x/y") == f"sha256-{SHA}"
    by_url = cache.partials.partial_key(sha256=None, url="https://u:p@x.test/y")
    assert by_url == cache.partials.partial_key(sha256=None, url="https://x.test/y") != cache.partials.partial_key(
        sha256=None, url="https://x.test/z")
    assert by_url.startswith("url-") and "p@" not in by_url


def test_a_partial_resumes_from_its_bytes_and_its_validator(cache: Cache) -> None:
    with cache.partials.partial("k") as part:
        assert part.size() == 0 and part.validator() is None
        with part.open_for_write(0) as f:
            f.write(b"abc")
        part.set_validator(url="https://u:secret@x.test/y", etag='"e"', last_modified=None, total=10)
    with cache.partials.partial("k") as part:
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
    with cache.partials.partial("k") as part:
        part.meta_path.write_text(json.dumps(meta))
        assert part.validator() is None


def test_a_link_at_a_partials_name_is_discarded_never_written_through(cache: Cache, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    with cache.partials.partial("k") as part:
        part.path.symlink_to(victim)
        assert part.size() == 0 and not os.path.lexists(part.path)
        part.path.symlink_to(victim)
        with pytest.raises(OSError):
            part.open_for_write(3)
        with part.open_for_write(0) as f:  # a new file: what was planted is removed first
            f.write(b"new")
    assert victim.read_bytes() == b"precious"


def test_a_partial_is_held_by_one_at_a_time(cache: Cache) -> None:
    with cache.partials.partial("k") as part:
        fd = os.open(part.folder / "k.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # another process's flock would wait
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(cache.partials.folder / "k.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on leaving
    finally:
        os.close(fd)


def test_something_planted_at_the_locks_name_is_replaced(cache: Cache, tmp_path: Path) -> None:
    cache.partials.folder.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (cache.partials.folder / "k.lock").symlink_to(victim)
    with cache.partials.partial("k"):
        assert not (cache.partials.folder / "k.lock").is_symlink()
    assert victim.read_bytes() == b"precious"
