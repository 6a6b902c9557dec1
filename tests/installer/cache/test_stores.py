"""``installer/cache/stores.py``: the download cache, its three stores on one root under the home."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from superfluid.installer.cache.stores import Cache


def test_for_home_is_the_homes_cache_folder(tmp_path: Path) -> None:
    c = Cache.for_home(tmp_path)
    assert (c.root, c.blobs.folder, c.partials.folder, c.http.folder) == (
        tmp_path / "cache", tmp_path / "cache" / "sha256", tmp_path / "cache" / "partial", tmp_path / "cache" / "http")


def test_the_stores_share_the_root_and_the_http_bodies_are_its_blobs(tmp_path: Path) -> None:
    c = Cache(str(tmp_path / "cache"))
    assert c.root == c.blobs.root == c.partials.root == c.http.root == tmp_path / "cache"
    entry = c.http.put_http_body("https://api.test/a", b"body")
    assert c.blobs.find_blob(entry.sha256) == c.blobs.folder / hashlib.sha256(b"body").hexdigest()


def test_a_cache_is_a_frozen_record(tmp_path: Path) -> None:
    c = Cache(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.root = tmp_path / "elsewhere"  # type: ignore[misc]
    assert c == Cache(tmp_path)
