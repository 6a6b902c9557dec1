"""The compat manifest service as a WSGI application, configured by the environment (read once).

See docs/manifest-service.md, "Under gunicorn".
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from argparse import ArgumentTypeError
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from superfluid.manifest.answers import JSON, Body, encode, error_body, render
from superfluid.manifest.command_line import DEFAULT_MAX_AGE, seconds
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey, package_keys_dir, read_key_dir, read_public_key
from superfluid.manifest.routes import Health, Route, RouteError, parse_route
from superfluid.manifest.settings import ENV_MAX_AGE, ENV_SOURCE, ENV_TTL, Settings, read_settings
from superfluid.manifest.sources import ManifestSource, source_from
from superfluid.manifest.tuf_live import LiveRepository, live_from
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError

__all__ = ["ServiceConfig", "Service", "app", "keys_from", "from_settings"]

log = logging.getLogger("superfluid.manifest")

_MEMO_MAX = 4096  # answers remembered per index (the rest are rendered again)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The service's limits, in seconds."""

    ttl: float | None = None  # between looks at the source; None: the source's own (1 s dir, 60 s URL)
    max_age: int = DEFAULT_MAX_AGE  # Cache-Control max-age of answers

    def __post_init__(self) -> None:
        if self.ttl is not None and self.ttl < 0:
            raise ValueError(f"ServiceConfig.ttl must not be negative, got {self.ttl!r}")
        if self.max_age < 0:
            raise ValueError(f"ServiceConfig.max_age must not be negative, got {self.max_age!r}")


@dataclass
class _Loaded:
    """One index and the answers rendered from it (replaced whole, never changed in place but the memo)."""

    index: Index
    loaded_at: float  # epoch seconds
    memo: dict[Route, tuple[Body, str]] = field(default_factory=dict)


def _etag(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


def _matches(header: str | None, etag: str) -> bool:
    """``If-None-Match`` against our strong ETag (weak comparison, as RFC 9110 §13.1.2 says)."""
    if not header:
        return False
    if header.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in header.split(","))


class Service:
    """The WSGI application over one source and one set of trusted keys.

    Args:
        source: where the releases are.
        keys: the trusted keys; with any, every release must be signed by one.
        config: the TTL and ``max-age``.
        clock: monotonic seconds (tests pass their own).
        tuf: the TUF repository ``/metadata/`` answers and each new index is published to, or None.
    """

    def __init__(self, source: ManifestSource, keys: Sequence[TrustedKey], config: ServiceConfig | None = None,
                 *, clock: Callable[[], float] = time.monotonic, tuf: LiveRepository | None = None) -> None:
        self.source = source
        self.tuf = tuf
        self.keys = tuple(keys)
        self.config = config or ServiceConfig()
        self.ttl = self.config.ttl if self.config.ttl is not None else source.ttl
        self._clock = clock
        self._loaded: _Loaded | None = None
        self._reload = threading.Lock()
        self._next_look = 0.0
        self.error: str | None = None  # why the last look at the source failed, if it did

    # -- the index ---------------------------------------------------------------------------------

    def load(self) -> Index:
        """Read the source now and answer from it.

        Raises:
            SuperfluidError: the source cannot be read (``BadFile``, ``DownloadError``...).
        """
        with self._reload:
            return self._look(force=True)

    def _look(self, *, force: bool = False) -> Index:
        """Rebuild the index if the source changed (the caller holds ``_reload``)."""
        current = self._loaded
        try:
            snapshot = self.source.snapshot()
            if force or current is None or snapshot.stamp != current.index.stamp:
                index = build_index(snapshot, self.keys)
                if self.tuf is not None:
                    self.tuf.publish(index)
                self._loaded = _Loaded(index, time.time())
                if current is not None:
                    log.info("%s changed: %d releases verified, %d rejected", self.source.describe(),
                             len(index.releases), len(index.rejected))
            self.error = None
        except SuperfluidError as e:
            self.error = str(e)
            log.warning("%s: %s", self.source.describe(), e)
            if current is None or force:
                raise
        finally:
            self._next_look = self._clock() + self.ttl
        assert self._loaded is not None
        return self._loaded.index

    def current(self) -> _Loaded | None:
        """The index to answer from, after a look at the source when the TTL has passed."""
        if self._clock() >= self._next_look and self._reload.acquire(blocking=self._loaded is None):
            try:
                if self._clock() >= self._next_look:
                    self._look()
            except SuperfluidError:
                pass  # kept in self.error; no index yet answers 503
            finally:
                self._reload.release()
        return self._loaded

    # -- answers -----------------------------------------------------------------------------------

    def _health(self, loaded: _Loaded | None) -> Body:
        doc = {"status": "ok" if loaded is not None and self.error is None else
               ("stale" if loaded is not None else "unavailable"),
               "source": self.source.describe(), "error": self.error, "keys": [k.key.id for k in self.keys],
               "releases": len(loaded.index.releases) if loaded else 0,
               "rejected": len(loaded.index.rejected) if loaded else 0,
               "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(loaded.loaded_at)) if loaded else None,
               "ttl": self.ttl}
        return Body(200 if loaded is not None else 503, JSON, encode(doc))

    def answer(self, path: str, query: str = "") -> tuple[Body, str | None, str]:
        """The answer to a GET: the body, its ETag (None for errors and ``/health``) and ``Cache-Control``."""
        if self.tuf is not None and path.startswith("/metadata/"):
            self.current()  # a changed source is signed before its metadata is answered
            return self.tuf.answer(path)
        try:
            route = parse_route(path, query)
        except RouteError as e:
            return error_body(e.status, e.parameter, e.message), None, "no-cache"
        loaded = self.current()
        if isinstance(route, Health):
            return self._health(loaded), None, "no-store"
        if loaded is None:
            return (error_body(503, "source", f"no releases could be read from {self.source.describe()}: "
                                              f"{self.error}"), None, "no-store")
        memo = loaded.memo.get(route)
        if memo is None:
            body = render(loaded.index, route)
            memo = (body, _etag(body.data))
            if len(loaded.memo) < _MEMO_MAX:
                loaded.memo[route] = memo
        body, etag = memo
        if body.status != 200:
            return body, None, "no-cache"
        return body, etag, f"public, max-age={self.config.max_age}"

    def __call__(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        if method not in ("GET", "HEAD"):
            body, etag, cache = error_body(405, "method", f"{method} is not answered: GET or HEAD"), None, "no-cache"
        else:
            # WSGI hands PATH_INFO over as bytes decoded as latin-1; the path was UTF-8
            raw = str(environ.get("PATH_INFO", ""))
            try:
                path = raw.encode("latin-1").decode("utf-8")
            except (UnicodeEncodeError, UnicodeDecodeError):
                path = raw
            try:
                body, etag, cache = self.answer(path, str(environ.get("QUERY_STRING", "")))
            except Exception:  # a fault of ours: logged here, a JSON 500 to the client, never a traceback
                log.exception("answering %s", path)
                body = error_body(500, "path", "the service failed to answer; see its log")
                etag, cache = None, "no-store"
        headers = [("Cache-Control", cache)]
        if etag is not None:
            headers.append(("ETag", etag))
            if _matches(environ.get("HTTP_IF_NONE_MATCH"), etag):
                start_response("304 Not Modified", headers)
                return [b""]
        if body.status == 405:
            headers.append(("Allow", "GET, HEAD"))
        headers += [("Content-Type", body.content_type), ("Content-Length", str(len(body.data)))]
        start_response(f"{body.status} {HTTPStatus(body.status).phrase}", headers)
        return [b""] if method == "HEAD" else [body.data]

    def close(self) -> None:
        self.source.close()


def keys_from(named: Sequence[str]) -> list[TrustedKey]:
    """The trusted keys of the service: the ones this package ships, then each file ``named``.

    Raises:
        BadFile: a key file cannot be read.
        BadKey: a key file is not a minisign public key.
    """
    return read_key_dir(package_keys_dir()) + [read_public_key(path) for path in named]


def _seconds(value: str, name: str) -> float | None:
    """``value`` (the variable ``name``, stripped) in seconds; None when it is empty."""
    if not value:
        return None
    try:
        return seconds(value)
    except ArgumentTypeError as e:
        raise UsageError(f"{name}={value!r}: {str(e).partition(', not ')[0]}") from None


def from_settings(settings: Settings) -> Service:
    """The service ``SUPERFLUID_MANIFEST_*`` configure, as ``settings`` holds them (see the module doc).

    Raises:
        UsageError: no source, or a bad value; BadFile/BadKey: a key file.
    """
    if not settings.source:
        raise UsageError(f"{ENV_SOURCE} is not set: name a directory of release folders, a mirror URL or "
                         f"github:OWNER/REPO")
    max_age = _seconds(settings.max_age, ENV_MAX_AGE)
    config = ServiceConfig(ttl=_seconds(settings.ttl, ENV_TTL),
                           max_age=int(max_age) if max_age is not None else DEFAULT_MAX_AGE)
    return Service(source_from(settings.source, settings), keys_from(settings.keys), config, tuf=live_from(settings))


class _FromEnvironment:
    """``app``: the service ``os.environ`` configures, made on the first request (each worker of a
    WSGI server makes its own); a configuration that does not work answers 503 with the reason."""

    def __init__(self) -> None:
        self._service: Service | None = None
        self._lock = threading.Lock()

    def __call__(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if self._service is None:
            with self._lock:
                if self._service is None:
                    try:
                        self._service = from_settings(read_settings(os.environ))
                    except SuperfluidError as e:
                        body = error_body(503, "configuration", str(e))
                        start_response("503 Service Unavailable", [("Content-Type", body.content_type),
                                                                   ("Cache-Control", "no-store"),
                                                                   ("Content-Length", str(len(body.data)))])
                        return [body.data]
        return self._service(environ, start_response)


#: the WSGI application: ``gunicorn superfluid.manifest.service:app``
app = _FromEnvironment()
