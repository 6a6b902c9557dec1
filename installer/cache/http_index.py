"""The HTTP index under ``$SUPERFLUID_HOME/cache/http``: what each URL last answered (validators, body digest).

See docs/install.md, "The cache".
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from superfluid.installer.cache.blobs import BlobStore, is_sha256
from superfluid.installer.cache.records import HTTP, prepare, read_record, text_key, write_private
from superfluid.runtime.kernel.redact import redact_url

__all__ = ["HttpIndex", "HttpEntry"]


@dataclass(kw_only=True, frozen=True, slots=True)
class HttpEntry:
    """What we last received from one URL: its validators and the digest of its body."""

    url: str
    sha256: str
    size: int
    etag: str | None = None
    last_modified: str | None = None
    link_next: str | None = None  # the next page of a paginated listing, as the server linked it
    stored_at: float = 0.0  # epoch seconds

    @classmethod
    def from_json(cls, data: Any) -> HttpEntry | None:
        """An entry from its JSON, or ``None`` if the file is not one of ours (treated as absent)."""
        if not isinstance(data, dict):
            return None
        try:
            entry = cls(
                url=str(data["url"]),
                sha256=str(data["sha256"]),
                size=int(data["size"]),
                etag=data.get("etag"),
                last_modified=data.get("last_modified"),
                link_next=data.get("link_next"),
                stored_at=float(data.get("stored_at", 0.0)),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return entry if is_sha256(entry.sha256) else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HttpIndex:
    """What URLs answered, kept in the cache rooted at ``root``; their bodies are blobs of ``blobs``."""

    root: Path
    blobs: BlobStore

    @property
    def folder(self) -> Path:
        """Where the entries lie: ``<root>/http``."""
        return self.root / HTTP

    def _entry_path(self, url: str) -> Path:
        return self.folder / f"{text_key(redact_url(url))}.json"  # keyed, and kept, without user:password@

    def http_entry(self, url: str) -> HttpEntry | None:
        """What was last received from ``url``, or ``None`` (absent, unreadable or not ours)."""
        entry = HttpEntry.from_json(read_record(self._entry_path(url)))
        return entry if entry is not None and entry.url == redact_url(url) else None

    def drop_http(self, url: str) -> None:
        """Forget what ``url`` answered (its body blob may stay; blobs are shared by content)."""
        with contextlib.suppress(FileNotFoundError):
            self._entry_path(url).unlink()

    def http_body(self, entry: HttpEntry, *, max_bytes: int) -> bytes | None:
        """The cached body of ``entry``, or ``None`` if it is gone or damaged."""
        return self.blobs.read_blob(entry.sha256, max_bytes=max_bytes)

    def put_http(
        self,
        url: str,
        *,
        sha256: str,
        size: int,
        etag: str | None = None,
        last_modified: str | None = None,
        link_next: str | None = None,
    ) -> HttpEntry:
        """Record what ``url`` answered (its body already a blob of ``sha256``)."""
        prepare(self.root)
        entry = HttpEntry(url=redact_url(url), sha256=sha256, size=size, etag=etag, last_modified=last_modified,
                          link_next=redact_url(link_next) if link_next else None, stored_at=time.time())
        write_private(self._entry_path(url), json.dumps(entry.to_json(), indent=1).encode())
        return entry

    def put_http_body(
        self,
        url: str,
        body: bytes,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        link_next: str | None = None,
    ) -> HttpEntry:
        """Store ``body`` as a blob and record it as what ``url`` answered."""
        digest, _ = self.blobs.put_bytes(body)
        return self.put_http(
            url, sha256=digest, size=len(body), etag=etag, last_modified=last_modified, link_next=link_next
        )
