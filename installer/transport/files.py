"""``file://`` (a mirror directory) answered as a static HTTP server would, and the fetcher of
``--offline``, which opens nothing."""

from __future__ import annotations

import email.utils
import hashlib
import os
from collections.abc import Iterator, Mapping

from superfluid.installer.errors import DownloadError, OfflineMissing
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import FetchResponse, HttpRequest
from superfluid.installer.transport.urls import path_of_file_url
from superfluid.runtime.kernel.jsonread import NotRegularFile, open_regular

__all__ = ["FileFetcher", "NoNetworkFetcher"]


class FileFetcher(Fetcher):
    """``file://`` URLs (a mirror directory), answering ``GET`` and ``HEAD`` as a static HTTP server
    would.

    ``ETag`` from inode, mtime and size; ``Range: bytes=N-`` honoured with 206 (and ``If-Range``);
    a missing file is a 404; a request with a body (a folder is not written through a URL) a 405.
    """

    schemes = frozenset({"file"})

    def _send(self, request: HttpRequest) -> FetchResponse:
        url, headers = request.url, request.headers
        if request.method not in ("GET", "HEAD"):
            return FetchResponse(url, 405, {"content-length": "0", "allow": "GET, HEAD"}, iter(()))
        path = path_of_file_url(url)
        try:  # a regular file only, opened without blocking (a FIFO cannot hold the open), judged by fstat
            f = open_regular(path, follow=True)
        except (FileNotFoundError, NotADirectoryError):
            return FetchResponse(url, 404, {"content-length": "0"}, iter(()))
        except NotRegularFile as e:  # a FIFO, a device: never waited on, never read without end
            if os.path.isdir(path):  # a folder is no file: not found, as a server says
                return FetchResponse(url, 404, {"content-length": "0"}, iter(()))
            raise DownloadError(url, f"{path} {e.strerror}") from None
        except OSError as e:
            raise DownloadError(url, f"cannot read {path}: {e.strerror or e}") from e
        st = os.fstat(f.fileno())
        etag = '"' + hashlib.sha256(f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}".encode()).hexdigest()[:32] + '"'
        modified = email.utils.formatdate(st.st_mtime, usegmt=True)
        out = {"etag": etag, "accept-ranges": "bytes", "last-modified": modified}
        if _header(headers, "If-None-Match") == etag:
            f.close()
            return FetchResponse(url, 304, out, iter(()))
        start = _range_start(headers)
        if_range = _header(headers, "If-Range")
        status = 200
        if start is not None and (if_range is None or if_range == etag):
            if start >= st.st_size:
                f.close()
                out.update({"content-range": f"bytes */{st.st_size}", "content-length": "0"})
                return FetchResponse(url, 416, out, iter(()))
            status = 206
            f.seek(start)
            out["content-range"] = f"bytes {start}-{st.st_size - 1}/{st.st_size}"
            out["content-length"] = str(st.st_size - start)
        else:
            out["content-length"] = str(st.st_size)
        if request.method == "HEAD":
            f.close()
            return FetchResponse(url, status, out, iter(()))
        size = self.config.chunk_size

        def chunks() -> Iterator[bytes]:
            with f:
                while block := f.read(size):
                    yield block

        return FetchResponse(url, status, out, chunks(), f.close)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def _range_start(headers: Mapping[str, str]) -> int | None:
    value = _header(headers, "Range")
    if not value or not value.startswith("bytes=") or not value.endswith("-"):
        return None
    first = value[len("bytes=") : -1]
    return int(first) if first.isdigit() else None


class NoNetworkFetcher(Fetcher):
    """Refuses every request without opening a connection (``--offline``'s backstop)."""

    schemes = frozenset({"https", "http", "file"})

    def _send(self, request: HttpRequest) -> FetchResponse:
        raise OfflineMissing("copy of this URL", url=request.url)
