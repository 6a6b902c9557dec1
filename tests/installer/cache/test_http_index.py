"""``installer/cache/http_index.py``: what URLs answered, keyed and kept without credentials, their bodies
blobs."""

from __future__ import annotations

import hashlib
import json

import pytest

from superfluid.installer.cache.http_index import HttpEntry
from superfluid.installer.cache.stores import Cache

SHA = hashlib.sha256(b"bundle bytes" * 100).hexdigest()


def test_the_http_cache_is_keyed_and_kept_without_credentials(cache: Cache) -> None:
    entry = cache.http.put_http_body("https://u:secret@api.test/releases?page=2", b'[{"tag": "v1"}]', etag='W/"1"',
                                link_next="https://u:secret@api.test/releases?page=3")
    assert (entry.url, entry.link_next, entry.etag) == ("https://api.test/releases?page=2",
                                                        "https://api.test/releases?page=3", 'W/"1"')
    assert cache.http.http_entry("https://api.test/releases?page=2") == entry
    assert cache.http.http_body(entry, max_bytes=100) == b'[{"tag": "v1"}]'
    stored = b"".join(p.read_bytes() for p in cache.http.folder.iterdir())
    assert b"secret" not in stored
    cache.http.drop_http("https://api.test/releases?page=2")
    assert cache.http.http_entry("https://api.test/releases?page=2") is None
    cache.http.drop_http("https://api.test/never")  # forgetting what was never kept is no error


def test_an_entry_for_another_url_is_not_answered(cache: Cache) -> None:
    cache.http.put_http_body("https://api.test/a", b"x")
    (path,) = cache.http.folder.iterdir()
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "url": "https://api.test/b"}))
    assert cache.http.http_entry("https://api.test/a") is None


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
