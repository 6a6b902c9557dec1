"""The values an HTTP exchange is made of, as the network seam passes them: a request (``HttpRequest``,
its ``Body`` bytes or an ``Upload``, a ``Credential`` for one origin) and an answer (``FetchResponse``
with its ``Headers``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeAlias

from superfluid.installer.transport.progress import Progress

__all__ = ["Headers", "Credential", "Upload", "Body", "HttpRequest", "FetchResponse"]

log = logging.getLogger(__name__)


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only response headers."""

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._d = {str(k).lower(): str(v) for k, v in pairs}

    def __getitem__(self, key: str) -> str:
        return self._d[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._d

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return f"Headers({self._d!r})"


@dataclass(frozen=True, slots=True)
class Credential:
    """A secret ``Authorization`` value that may be sent to one origin only."""

    origin: str  # e.g. "https://api.github.com", as urls.origin_of spells it
    authorization: str  # e.g. "Bearer <token>"; never logged

    def __repr__(self) -> str:
        return f"Credential(origin={self.origin!r}, authorization=<hidden>)"


class Upload:
    """A request body of ``size`` bytes, read from bytes or a file in chunks as it is sent and told
    to ``progress``; ``rewind`` makes it ready to be sent again (a retry, a ``307``), ``close``
    closes its file. The transports read it as a file (``read``, ``len``)."""

    def __init__(self, source: bytes | Path, size: int, *, progress: Progress | None = None, name: str = "") -> None:
        self._data = source if isinstance(source, bytes) else b""
        self._file: BinaryIO | None = open(source, "rb") if isinstance(source, Path) else None  # noqa: SIM115
        self._size = size
        self._pos = 0
        self._progress, self.name = progress, name
        if progress is not None:
            progress.start(name, size)

    def __len__(self) -> int:
        return self._size - self._pos

    def read(self, n: int | None = -1) -> bytes:
        n = self._size - self._pos if n is None or n < 0 else min(n, self._size - self._pos)
        chunk = self._file.read(n) if self._file is not None else self._data[self._pos:self._pos + n]
        self._pos += len(chunk)
        if chunk and self._progress is not None:
            self._progress.advance(self.name, len(chunk))
        return chunk

    def rewind(self) -> None:
        if self._pos == 0:
            return
        if self._file is not None:
            self._file.seek(0)
        self._pos = 0
        if self._progress is not None:
            self._progress.start(self.name, self._size)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._progress is not None:
            self._progress.finish(self.name)


#: what a request sends: bytes, or an ``Upload`` read as it goes
Body: TypeAlias = bytes | Upload


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One hop of a request: what a ``Fetcher`` implementation sends, exactly (no header added)."""

    method: str  # upper case: GET, HEAD, PUT, POST, PATCH
    url: str
    headers: Mapping[str, str]
    body: Body | None = None


class FetchResponse:
    """One HTTP answer: final URL, status, headers and a body of byte chunks, read once.

    Iterate it for the body; ``close()`` (or leaving ``with``) releases the connection.
    """

    def __init__(
        self,
        url: str,
        status: int,
        headers: Mapping[str, str],
        chunks: Iterator[bytes],
        close: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.status = status
        self.headers = headers if isinstance(headers, Headers) else Headers(headers)
        self._chunks = chunks
        self._close = close

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks

    def read(self) -> bytes:
        """The whole (capped) body."""
        return b"".join(self._chunks)

    def close(self) -> None:
        if self._close is not None:
            close, self._close = self._close, None
            try:
                close()
            except Exception:  # closing a broken connection must not hide the real error
                log.debug("closing %s failed", self.url, exc_info=True)

    def __enter__(self) -> FetchResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
