"""``installer/transport/files.py``: ``file://`` answered as a static HTTP server would (whole, ranges,
``If-Range``, ``304``, ``404``, ``HEAD``; nothing written through a URL), and the fetcher of
``--offline``, which opens nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, OfflineMissing
from superfluid.installer.transport.files import FileFetcher, NoNetworkFetcher


class TestFileFetcher:
    def test_whole_range_if_range_and_missing(self, tmp_path: Path) -> None:
        p = tmp_path / "f.bin"
        p.write_bytes(b"0123456789")
        f = FileFetcher(FetchConfig(chunk_size=4))
        url = p.as_uri()
        with f.open(url) as r:
            assert (r.status, r.read()) == (200, b"0123456789")
            etag = r.headers["etag"]
        with f.open(url, {"Range": "bytes=4-", "If-Range": etag}) as r:
            assert (r.status, r.read(), r.headers["content-range"]) == (206, b"456789", "bytes 4-9/10")
        with f.open(url, {"Range": "bytes=4-", "If-Range": '"other"'}) as r:
            assert (r.status, r.read()) == (200, b"0123456789")
        with f.open(url, {"If-None-Match": etag}) as r:
            assert r.status == 304
        with pytest.raises(DownloadError, match="HTTP 404"):
            f.open((tmp_path / "nope").as_uri())

    def test_head_says_the_length_and_sends_nothing(self, tmp_path: Path) -> None:
        p = tmp_path / "f.bin"
        p.write_bytes(b"0123456789")
        with FileFetcher().request("HEAD", p.as_uri(), max_bytes=1) as r:
            assert (r.status, r.headers["content-length"], r.read()) == (200, "10", b"")

    @pytest.mark.parametrize("method", ["PUT", "POST"])
    def test_nothing_is_written_through_a_url(self, tmp_path: Path, method: str) -> None:
        p = tmp_path / "f.bin"
        p.write_bytes(b"kept")
        with pytest.raises(DownloadError, match="HTTP 405"):
            FileFetcher().request(method, p.as_uri(), body=b"other")
        assert p.read_bytes() == b"kept"

    @pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
    def test_a_fifo_or_a_device_is_refused_without_waiting(self, tmp_path: Path, kind: str) -> None:
        """Issue 44, item 2: a lock's file:// asset naming a FIFO held mirror sync for ever."""
        p = tmp_path / "asset"
        if kind == "fifo":
            os.mkfifo(p)
        else:
            os.symlink("/dev/zero", p)
        said = "a FIFO" if kind == "fifo" else "a character device"
        with pytest.raises(DownloadError, match=f"{p} is {said}, not a regular file"):
            FileFetcher().open(p.as_uri())
        with pytest.raises(DownloadError, match="HTTP 404"):
            FileFetcher().open(tmp_path.as_uri())  # a folder is no file: not found, as a server says

    def test_refuses_http(self) -> None:
        with pytest.raises(DownloadError, match="http:// URLs are not fetched here"):
            FileFetcher().open("http://127.0.0.1:1/x")


def test_no_network_fetcher_refuses_without_connecting(no_sockets: list[object]) -> None:
    with pytest.raises(OfflineMissing, match="offline"):
        NoNetworkFetcher().open("https://api.github.com/x")
    with pytest.raises(OfflineMissing):
        NoNetworkFetcher().request("PUT", "https://registry.example/v2/x/blobs/uploads/", body=b"")
    assert no_sockets == []
