"""The live service's TUF metadata: signed online, or answered as an export left it.

See docs/manifest-service.md, "The live service".
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from superfluid.manifest.answers import JSON, Body, error_body, render
from superfluid.manifest.export import export, export_routes
from superfluid.manifest.settings import ENV_TUF_REPO, Settings
from superfluid.manifest.tuf_keys import KeySet, read_keys
from superfluid.manifest.tuf_repository import METADATA, Expiry, parse_expires, refresh_timestamp, sign_export
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads, read_bytes

if TYPE_CHECKING:
    from superfluid.manifest.index import Index

__all__ = ["LiveRepository", "live_from"]

log = logging.getLogger("superfluid.manifest")

_NAME = re.compile(r"^(?:[1-9][0-9]{0,9}\.root|timestamp|snapshot|targets)\.json$")
_MAX_BYTES = 8 << 20


class LiveRepository:
    """The metadata ``/metadata/<name>.json`` answers, kept in ``repo``.

    Args:
        repo: the repository directory (an export of the index with its metadata).
        keys: the online keys, or None (the directory is signed elsewhere).
        expiry: each role's validity when signed here.
        clock: epoch seconds (tests pass their own).

    Raises:
        UsageError: ``keys`` lacks an online key; ``repo`` without keys holds no metadata.
    """

    def __init__(self, repo: Path, keys: KeySet | None, expiry: Expiry | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.repo = Path(repo).resolve()
        self.keys = keys
        self.expiry = expiry or Expiry()
        self._clock = clock
        self._files: dict[str, tuple[tuple[int, int, int], bytes]] = {}
        self._mutex = threading.Lock()
        if keys is not None:
            for role in ("targets", "snapshot", "timestamp"):
                if not keys.signers[role]:
                    raise UsageError(f"--tuf-keys {keys.where} holds no {role} key: the service signs each new index "
                                     "and its timestamp with the targets, snapshot and timestamp keys",
                                     advice="serve with --tuf-repo alone to answer metadata signed elsewhere")
        elif not (self.repo / METADATA / "timestamp.json").is_file():
            raise UsageError(f"--tuf-repo {self.repo} holds no {METADATA}/timestamp.json, and the service holds no "
                             "key to sign one", advice="give --tuf-keys DIR, or export into it with --tuf-keys first")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.repo.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.repo.parent / f".{self.repo.name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(int(self._clock()), timezone.utc)

    def _signed(self, name: str) -> dict[str, Any] | None:
        data = self._read(name)
        try:
            doc = loads(data, max_bytes=_MAX_BYTES) if data is not None else None
            return dict(doc["signed"]) if doc is not None else None
        except (UntrustedJson, KeyError, TypeError, ValueError):
            return None

    def _due(self, name: str, role: str) -> bool:
        """``role``'s metadata is absent or has less than half its life left."""
        signed = self._signed(name)
        if signed is None:
            return True
        try:
            expires = datetime.strptime(str(signed["expires"]), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except (KeyError, ValueError):
            return True
        return expires - self._now() < self.expiry.of(role) / 2

    def _listed(self) -> dict[str, tuple[int, str]] | None:
        signed = self._signed("targets.json")
        if signed is None:
            return None
        try:
            return {path: (int(t["length"]), str(t["hashes"]["sha256"])) for path, t in signed["targets"].items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def publish(self, index: Index) -> None:
        """Make the directory's metadata list ``index``'s answers (signing, with keys; else a log line
        when they differ).

        Raises:
            BadFile: the directory cannot be written; UsageError: the root does not trust the keys.
        """
        answers = {r.path.lstrip("/"): render(index, r).data for r in export_routes(index)}
        want = {path: (len(data), hashlib.sha256(data).hexdigest()) for path, data in answers.items()}
        if self.keys is None:
            if self._listed() != want:
                log.warning("%s lists other answers than this index gives: clients refuse the changed ones until "
                            "it is exported again with --tuf-keys", self.repo / METADATA)
            return
        keys = self.keys
        with self._locked():
            self._files.clear()
            if self._listed() == want and not self._due("targets.json", "targets") and \
                    not self._due("snapshot.json", "snapshot"):
                return
            export(index, self.repo, sign=lambda stage, previous: sign_export(stage, previous, keys, self.expiry,
                                                                              now=self._now()))
            self._files.clear()
        log.info("%s: signed the index (%d answers)", self.repo / METADATA, len(answers))

    def _refresh(self) -> None:
        if self.keys is None or not self._due("timestamp.json", "timestamp"):
            return
        with self._mutex, self._locked():
            self._files.clear()
            if self._due("timestamp.json", "timestamp"):  # another worker may have just done it
                version = refresh_timestamp(self.repo, self.keys, self.expiry, now=self._now())
                log.info("%s: re-signed the timestamp (version %d)", self.repo / METADATA, version)
            self._files.clear()

    def _read(self, name: str) -> bytes | None:
        """The file's bytes, read again when it changed on disk; None when absent."""
        path = self.repo / METADATA / name
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        kept = self._files.get(name)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        try:
            data = read_bytes(path, max_bytes=_MAX_BYTES)
        except OSError:
            return None
        self._files[name] = (stamp, data)
        return data

    def answer(self, path: str) -> tuple[Body, str | None, str]:
        """The answer to ``GET /metadata/<name>``: body, no ETag, ``no-cache`` (freshness is the point)."""
        name = path.removeprefix("/metadata/")
        if not _NAME.match(name):
            return error_body(404, "path", f"no metadata {name!r}"), None, "no-cache"
        if name == "timestamp.json":
            try:
                self._refresh()
            except (BadFile, UsageError, OSError) as e:
                log.warning("%s: the timestamp could not be re-signed: %s", self.repo / METADATA, e)
        data = self._read(name)
        if data is None:
            return error_body(404, "path", f"no metadata {name}"), None, "no-cache"
        return Body(200, JSON, data), None, "no-cache"


def live_from(settings: Settings, *, repo: str | None = None, keys: str | None = None,
              expires: Sequence[str] | None = None) -> LiveRepository | None:
    """The repository the flags (else ``settings``: ``SUPERFLUID_MANIFEST_TUF_REPO``, ``_TUF_KEYS``,
    ``_EXPIRES``, comma-separated) name; None when no repository is named.

    Raises:
        UsageError: keys without a repository, a bad ``--expires``; BadFile: the key set.
    """
    repo = repo or settings.tuf_repo
    keys = keys or settings.tuf_keys
    if expires is None:
        expires = settings.expires
    if repo is None:
        if keys is not None:
            raise UsageError(f"--tuf-keys needs --tuf-repo DIR (or {ENV_TUF_REPO}): where the service keeps its "
                             "signed metadata between restarts")
        return None
    return LiveRepository(Path(repo), read_keys(keys) if keys else None, parse_expires(expires))
