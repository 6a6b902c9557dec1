"""``installer/transport/messages.py``: the values the seam passes (headers read whatever their case, a
credential that never shows its secret, an upload read in chunks and sent again whole, an answer
closed once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.installer.transport.messages import Credential, FetchResponse, Headers, Upload
from superfluid.installer.transport.progress import Progress


def test_headers_are_read_whatever_their_case() -> None:
    h = Headers([("Content-Type", "text/plain"), ("ETag", '"x"')])
    assert (h["content-type"], h["ETAG"], "Etag" in h, 1 in h, list(h), len(h)) == (
        "text/plain", '"x"', True, False, ["content-type", "etag"], 2)
    with pytest.raises(KeyError):
        h["location"]


def test_a_credential_never_shows_its_secret() -> None:
    text = repr(Credential("https://api.example.test", "Bearer s3cret"))
    assert "s3cret" not in text and "https://api.example.test" in text


def test_an_answer_is_closed_once_and_a_failing_close_hides_nothing() -> None:
    closed: list[str] = []

    def close() -> None:
        closed.append("x")
        raise OSError("connection already broken")

    with FetchResponse("https://x.test/", 200, {"Content-Length": "2"}, iter([b"o", b"k"]), close) as r:
        assert (isinstance(r.headers, Headers), r.headers["content-length"], r.read()) == (True, "2", b"ok")
    r.close()
    assert closed == ["x"]


def test_an_upload_is_read_in_chunks_told_to_progress_and_rewound() -> None:
    told: list[tuple[str, object]] = []

    class Told(Progress):
        def start(self, name: str, total: int | None, done: int = 0) -> None:
            told.append(("start", total))

        def advance(self, name: str, n: int) -> None:
            told.append(("advance", n))

        def finish(self, name: str) -> None:
            told.append(("finish", name))

    upload = Upload(b"abcdef", 6, progress=Told(), name="f")
    assert (len(upload), upload.read(4), len(upload), upload.read(), upload.read()) == (6, b"abcd", 2, b"ef", b"")
    upload.rewind()
    assert upload.read(100) == b"abcdef"
    upload.close()
    assert told == [("start", 6), ("advance", 4), ("advance", 2), ("start", 6), ("advance", 6), ("finish", "f")]


def test_an_upload_from_a_file_is_sent_again_whole(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"0123456789")
    upload = Upload(path, 10)
    try:
        assert (upload.read(3), upload.read()) == (b"012", b"3456789")
        upload.rewind()
        assert (len(upload), upload.read()) == (10, b"0123456789")
    finally:
        upload.close()
