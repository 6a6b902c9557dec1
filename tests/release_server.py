"""A GitHub-shaped release server for tests: real HTTP on loopback, or in memory (SPEC §11).

One state (repositories, releases, assets, faults, rate limit) answered three ways:

- ``ReleaseServer.url``: a GitHub API on ``127.0.0.1`` (``ThreadingHTTPServer`` in a thread):
  ``GET /repos/{owner}/{repo}/releases?per_page=&page=`` with ``Link`` pagination, weak ``ETag``
  and 304, ``X-RateLimit-*`` headers, 403/429 when the limit is spent;
  ``GET /repos/{owner}/{repo}/releases/tags/{tag}``; ``GET /repos/{owner}/{repo}/attestations/sha256:{hex}``
  (the Sigstore bundles ``attest`` published for an asset of those bytes, 404 when none); asset objects
  with ``browser_download_url``, ``size``, ``digest``; downloads at
  ``/{owner}/{repo}/releases/download/{tag}/{name}`` with strong ``ETag``, ``Last-Modified`` and
  ``Range``/``If-Range`` (206), optionally answered by a 302 to a second server, the "object store"
  on another port (``object_store=True``), as GitHub does.
- ``ReleaseServer.mirror_url`` (``/mirror/`` on the same server) and ``write_mirror(dir)``: the
  same releases as a static mirror in the layout ``superfluid.installer.sources.mirror`` defines, each
  attested asset's bundle beside it as ``<name>.sigstore.json``.
- ``ReleaseServer.memory_fetcher()``: the same answers through the fetcher seam, without sockets.

Faults are injected per URL path (``fault(path, kind, ...)``) and consumed in order: ``status``
(N x 5xx then success), ``rate_limit`` (429/403 with ``Retry-After``), ``cut`` (close mid-body),
``stall`` (send some bytes, then nothing), ``wrong_bytes`` (the byte at ``after`` flipped),
``ignore_range`` (200 to a ``Range``), ``bad_range`` (206 starting elsewhere), ``redirect``, ``drop``
(close before answering). Every request is logged (server, method, path, headers, monotonic time,
status) for assertions.

Usage::

    with ReleaseServer() as server:
        server.add_release("basecompute/baseRT", "v0.4.0",
                           assets={"basert-engine-linux-x64-0.4.0.tar.gz": data,
                                   "basert-engine-abi-1.txt": b"1\\n"},
                           sha256_files=True)
        server.fault(server.download_path("basecompute/baseRT", "v0.4.0", name), "cut", after=1000)
        env = {"SUPERFLUID_GITHUB_API": server.url}
"""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError, DownloadStalled
from superfluid.installer.sources.mirror import asset_path, listing_path
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import FetchResponse, Headers, HttpRequest

__all__ = ["ReleaseServer", "Fault", "Logged", "sha256_line"]

_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: deterministic timestamps


def sha256_line(name: str, data: bytes) -> bytes:
    """A ``.sha256`` sidecar as ``shasum -a 256`` writes it: ``<hex>  <name>\\n``."""
    return f"{hashlib.sha256(data).hexdigest()}  {name}\n".encode()


def _iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass
class Fault:
    """One injected misbehaviour for requests to one path (``times`` requests, then gone)."""

    kind: str
    times: int = 1
    status: int = 503
    after: int = 0  # body bytes sent before a cut or a stall
    seconds: float = 0.0  # stall length; Retry-After for rate_limit
    location: str | None = None  # redirect target
    reset_in: float | None = None  # rate_limit: X-RateLimit-Reset this far ahead
    retry_after: bool = True  # rate_limit: send Retry-After


@dataclass
class Logged:
    """One request as the server saw it."""

    server: str  # "api" | "objects"
    method: str
    path: str  # with the query
    headers: dict[str, str]
    time: float  # time.monotonic() when it arrived
    status: int | None = None

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass
class _Asset:
    name: str
    data: bytes
    id: int
    digest: str | None  # as listed

    @cached_property
    def sha256(self) -> str:  # once per asset: a benchmark's bundle is 200 MB (its bytes never change)
        return hashlib.sha256(self.data).hexdigest()

    @property
    def etag(self) -> str:
        return f'"{self.sha256[:32]}"'


@dataclass
class _Release:
    repo: str
    tag: str
    id: int
    name: str
    draft: bool
    prerelease: bool
    published_at: str | None
    assets: dict[str, _Asset] = field(default_factory=dict)


@dataclass
class _Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    cut_after: int | None = None  # close the connection after this many body bytes
    stall: float = 0.0  # ... after sleeping this long (with cut_after)


class ReleaseServer:
    """The fake. Start it (``with`` or ``start()``), publish releases, inject faults, read ``log``.

    Args:
        object_store: answer downloads with a 302 to a second server on another port.
        default_per_page: releases per page when the client does not say (GitHub: 30).
        show_drafts: list drafts (as GitHub does for a token with push access), so that skipping
            them is the client's job.
        rate_limit: requests the API allows before answering 403 (``None``: unlimited).
    """

    def __init__(
        self,
        *,
        object_store: bool = False,
        default_per_page: int = 30,
        show_drafts: bool = True,
        rate_limit: int | None = None,
    ) -> None:
        self.object_store = object_store
        self.default_per_page = default_per_page
        self.show_drafts = show_drafts
        self.rate_limit = rate_limit
        self.rate_limit_status = 403
        self.rate_limit_reset = _EPOCH
        self.gzip_json = True
        self._lock = threading.RLock()
        self._releases: list[_Release] = []  # oldest first; listed newest first
        self._blobs: dict[str, bytes] = {}
        self._faults: dict[str, list[Fault]] = {}
        #: Sigstore bundles by (repo, tag, asset name): answered by the attestations API for the asset's
        #: digest, and beside the asset in the mirror as ``<name>.sigstore.json``
        self._bundles: dict[tuple[str, str, str], list[Any]] = {}
        #: attestations answers set whole, by (repo, sha256): a hostile answer
        self._answers: dict[tuple[str, str], Any] = {}
        self._next_id = 1000
        self._stop = threading.Event()
        self.log: list[Logged] = []
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.url = ""
        self.objects_url = ""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ReleaseServer:
        api = self._serve("api")
        self.url = f"http://127.0.0.1:{api.server_address[1]}"
        if self.object_store:
            objects = self._serve("objects")
            self.objects_url = f"http://127.0.0.1:{objects.server_address[1]}"
        return self

    def stop(self) -> None:
        self._stop.set()
        for s in self._servers:
            s.shutdown()
            s.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> ReleaseServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, name: str) -> ThreadingHTTPServer:
        owner = self

        class Handler(_Handler):
            fake = owner
            server_name_ = name

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                  name=f"release-server-{name}", daemon=True)
        thread.start()
        self._servers.append(httpd)
        self._threads.append(thread)
        return httpd

    # -- state ----------------------------------------------------------------------------------

    def add_release(
        self,
        repo: str,
        tag: str,
        assets: Mapping[str, bytes] | None = None,
        *,
        draft: bool = False,
        prerelease: bool = False,
        digests: bool | Mapping[str, str | None] = True,
        sha256_files: bool = False,
        name: str | None = None,
        published_at: str | None = None,
    ) -> dict[str, Any]:
        """Publish a release (newest so far); answers its API object.

        Args:
            assets: file name -> bytes.
            digests: list each asset's ``digest`` (True), none (False, as before GitHub had them),
                or per name the listed value (a wrong one makes an inconsistent release).
            sha256_files: also publish ``<name>.sha256`` beside each asset (``shasum`` format).
        """
        files = dict(assets or {})
        if sha256_files:
            for n, data in list(files.items()):
                if not n.endswith(".sha256"):
                    files[f"{n}.sha256"] = sha256_line(n, data)
        with self._lock:
            self._next_id += 1
            rel = _Release(repo, tag, self._next_id, name or tag, draft, prerelease,
                           None if draft else (published_at or _iso(_EPOCH + self._next_id)))
            for n, data in files.items():
                self._add_asset(rel, n, data, digests)
            self._releases = [r for r in self._releases if not (r.repo == repo and r.tag == tag)]
            self._releases.append(rel)
            return self._release_json(rel)

    def add_asset(self, repo: str, tag: str, name: str, data: bytes, *, digest: bool | str | None = True) -> None:
        """Add or replace one asset of a published release (its ETag changes with its bytes)."""
        with self._lock:
            rel = self._find(repo, tag)
            if rel is None:
                raise KeyError(f"no release {tag} in {repo}")
            self._add_asset(rel, name, data, {name: digest} if not isinstance(digest, bool) else digest)

    def _add_asset(self, rel: _Release, name: str, data: bytes, digests: bool | Mapping[str, Any]) -> None:
        self._next_id += 1
        sha = hashlib.sha256(data).hexdigest()
        if isinstance(digests, bool):
            digest = f"sha256:{sha}" if digests else None
        else:
            digest = digests.get(name, f"sha256:{sha}")
        rel.assets[name] = _Asset(name, data, self._next_id, digest)
        self._blobs[sha] = data

    def asset_data(self, repo: str, tag: str, name: str) -> bytes:
        """The bytes of asset ``name`` of release ``tag``."""
        with self._lock:
            rel = self._find(repo, tag)
            if rel is None or name not in rel.assets:
                raise KeyError(f"no asset {name} in {repo} {tag}")
            return rel.assets[name].data

    def attest(self, repo: str, tag: str, name: str, bundle: Any) -> None:
        """Publish ``bundle`` (a Sigstore bundle: a JSON object, or raw bytes for the mirror's file) as
        an attestation of asset ``name`` of release ``tag``: the attestations API lists it for the
        asset's digest, the mirror serves it as ``<name>.sigstore.json`` beside the asset."""
        with self._lock:
            rel = self._find(repo, tag)
            if rel is None or name not in rel.assets:
                raise KeyError(f"no asset {name} in {repo} {tag}")
            self._bundles.setdefault((repo, tag, name), []).append(bundle)

    def attestations_answer(self, repo: str, sha256: str, body: Any) -> None:
        """Answer ``body`` (JSON) to the attestations API for ``sha256`` in ``repo``, whatever is attested."""
        with self._lock:
            self._answers[(repo.lower(), sha256)] = body

    def _attestations(self, repo: str, sha256: str) -> Any | None:
        """The API's answer for ``sha256`` in ``repo``: every bundle attested for an asset of those bytes
        (None: none, a 404, as GitHub answers)."""
        if (repo.lower(), sha256) in self._answers:
            return self._answers[(repo.lower(), sha256)]
        bundles = [b for (r, tag, name), listed in self._bundles.items() if r.lower() == repo.lower()
                   for b in listed if isinstance(b, dict) and (rel := self._find(r, tag)) is not None
                   and name in rel.assets and rel.assets[name].sha256 == sha256]
        if not bundles:
            return None
        return {"attestations": [{"bundle": b, "repository_id": 1, "bundle_url": None} for b in bundles]}

    def _beside(self, repo: str, tag: str, name: str) -> bytes | None:
        """The mirror's ``<name>.sigstore.json`` of an asset: its first bundle's bytes."""
        listed = self._bundles.get((repo, tag, name))
        if not listed:
            return None
        first = listed[0]
        return first if isinstance(first, bytes) else json.dumps(first).encode()

    def remove_release(self, repo: str, tag: str) -> None:
        with self._lock:
            self._releases = [r for r in self._releases if not (r.repo == repo and r.tag == tag)]

    def fault(self, path: str, kind: str, **kwargs: Any) -> Fault:
        """Inject a fault for requests whose path (query ignored) is ``path``; answers it."""
        f = Fault(kind, **kwargs)
        with self._lock:
            self._faults.setdefault(path, []).append(f)
        return f

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    def requests_to(self, path_prefix: str, server: str | None = None) -> list[Logged]:
        """Logged requests whose path starts with ``path_prefix`` (and to ``server`` if given)."""
        with self._lock:
            return [r for r in self.log if r.path.startswith(path_prefix) and (server is None or r.server == server)]

    # -- paths ----------------------------------------------------------------------------------

    @staticmethod
    def listing_path(repo: str) -> str:
        return f"/repos/{repo}/releases"

    @staticmethod
    def download_path(repo: str, tag: str, name: str) -> str:
        return f"/{repo}/releases/download/{quote(tag, safe='')}/{quote(name, safe='')}"

    @staticmethod
    def object_path(data: bytes) -> str:
        return f"/objects/{hashlib.sha256(data).hexdigest()}"

    def download_url(self, repo: str, tag: str, name: str) -> str:
        return self.url + self.download_path(repo, tag, name)

    @property
    def mirror_url(self) -> str:
        return f"{self.url}/mirror/"

    @staticmethod
    def mirror_path(repo: str, tag: str | None = None, name: str | None = None) -> str:
        """The path of the mirror's listing of ``repo``, or of one asset (for ``fault``)."""
        if tag is None or name is None:
            return "/mirror/" + listing_path(repo)
        return "/mirror/" + asset_path(repo, tag, name)

    # -- JSON -----------------------------------------------------------------------------------

    def _find(self, repo: str, tag: str) -> _Release | None:
        return next((r for r in self._releases if r.repo == repo and r.tag == tag), None)

    def _listed(self, repo: str) -> list[_Release]:
        return [r for r in reversed(self._releases) if r.repo == repo and (self.show_drafts or not r.draft)]

    def _release_json(self, rel: _Release, *, base: str | None = None) -> dict[str, Any]:
        api = base if base is not None else self.url
        return {
            "url": f"{api}/repos/{rel.repo}/releases/{rel.id}",
            "html_url": f"{api}/{rel.repo}/releases/tag/{rel.tag}",
            "id": rel.id,
            "tag_name": rel.tag,
            "target_commitish": "main",
            "name": rel.name,
            "draft": rel.draft,
            "prerelease": rel.prerelease,
            "created_at": _iso(_EPOCH + rel.id),
            "published_at": rel.published_at,
            "assets": [
                {
                    "url": f"{api}/repos/{rel.repo}/releases/assets/{a.id}",
                    "id": a.id,
                    "name": a.name,
                    "label": "",
                    "content_type": "application/octet-stream",
                    "state": "uploaded",
                    "size": len(a.data),
                    "digest": a.digest,
                    "download_count": 0,
                    "created_at": _iso(_EPOCH + a.id),
                    "updated_at": _iso(_EPOCH + a.id),
                    "browser_download_url": f"{api}{self.download_path(rel.repo, rel.tag, a.name)}",
                }
                for a in rel.assets.values()
            ],
            "body": "",
        }

    def releases_json(self, repo: str) -> list[dict[str, Any]]:
        """The whole listing of ``repo`` as the API would answer it (newest first)."""
        with self._lock:
            return [self._release_json(r) for r in self._listed(repo)]

    def write_mirror(self, root: str | Path) -> Path:
        """Write every repository's releases as a static mirror under ``root``; answers ``root``."""
        root = Path(root)
        with self._lock:
            repos = sorted({r.repo for r in self._releases})
            for repo in repos:
                listing = root / listing_path(repo)
                listing.parent.mkdir(parents=True, exist_ok=True)
                listing.write_text(json.dumps([self._release_json(r) for r in self._listed(repo)], indent=1))
                for rel in self._listed(repo):
                    for a in rel.assets.values():
                        target = root / asset_path(repo, rel.tag, a.name)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(a.data)
                        if (bundle := self._beside(repo, rel.tag, a.name)) is not None:
                            target.with_name(a.name + ".sigstore.json").write_bytes(bundle)
        return root

    # -- answering (shared by HTTP and memory) --------------------------------------------------

    def respond(self, server: str, method: str, target: str, headers: Mapping[str, str]) -> _Reply:
        """The answer to one request; logs it. Used by both transports."""
        hdrs = Headers(headers)
        entry = Logged(server, method, target, dict(headers), time.monotonic())
        with self._lock:
            self.log.append(entry)
            reply = self._answer(server, method, target, hdrs)
        entry.status = reply.status
        return reply

    def _take_fault(self, path: str) -> Fault | None:
        queue = self._faults.get(path)
        if not queue:
            return None
        f = queue[0]
        f.times -= 1
        if f.times <= 0:
            queue.pop(0)
        return f

    def _answer(self, server: str, method: str, target: str, h: Headers) -> _Reply:
        parts = urlsplit(target)
        path = unquote(parts.path)
        raw_path = parts.path
        fault = self._take_fault(raw_path) or (self._take_fault(path) if path != raw_path else None)
        if fault is not None and fault.kind in ("status", "rate_limit", "redirect", "drop"):
            return self._fault_reply(fault)
        if method not in ("GET", "HEAD"):
            return _json_reply(405, {"message": "Method Not Allowed"})
        if server == "objects":
            if path.startswith("/objects/") and path[len("/objects/"):] in self._blobs:
                data = self._blobs[path[len("/objects/"):]]
                return self._file_reply(data, f'"{hashlib.sha256(data).hexdigest()[:32]}"', h, fault)
            return _json_reply(404, {"message": "Not Found"})
        if path.startswith("/mirror/"):
            return self._mirror(path[len("/mirror/"):], h, fault)
        if path.startswith("/repos/"):
            reply = self._api(path, parse_qs(parts.query), h, garble=fault is not None and fault.kind == "wrong_bytes")
            if fault is not None and reply.body:
                if fault.kind in ("cut", "stall"):
                    reply.cut_after = min(fault.after, len(reply.body))
                    reply.stall = fault.seconds if fault.kind == "stall" else 0.0
            return reply
        segs = path.strip("/").split("/")
        if len(segs) >= 6 and segs[2:4] == ["releases", "download"]:
            repo, tag, name = f"{segs[0]}/{segs[1]}", "/".join(segs[4:-1]), segs[-1]
            rel = self._find(repo, tag)
            asset = rel.assets.get(name) if rel is not None else None
            if asset is None:
                return _json_reply(404, {"message": "Not Found"})
            if self.object_store:
                loc = f"{self.objects_url}/objects/{asset.sha256}?response-content-disposition=attachment"
                return _Reply(302, [("Location", loc), ("Content-Length", "0")])
            return self._file_reply(asset.data, asset.etag, h, fault)
        return _json_reply(404, {"message": "Not Found"})

    def _fault_reply(self, f: Fault) -> _Reply:
        if f.kind == "drop":
            return _Reply(0, [], cut_after=0)
        if f.kind == "redirect":
            return _Reply(f.status if f.status in (301, 302, 303, 307, 308) else 302,
                          [("Location", f.location or "/"), ("Content-Length", "0")])
        if f.kind == "rate_limit":
            status = f.status if f.status in (403, 429) else 429
            hdrs = [("X-RateLimit-Limit", "60"), ("X-RateLimit-Remaining", "0"),
                    ("X-RateLimit-Used", "60"), ("X-RateLimit-Resource", "core")]
            if f.reset_in is not None:
                hdrs.append(("X-RateLimit-Reset", str(int(time.time() + f.reset_in))))
            if f.retry_after:
                hdrs.append(("Retry-After", str(int(f.seconds))))
            return _json_reply(status, {"message": "API rate limit exceeded"}, hdrs)
        return _json_reply(f.status, {"message": f"injected HTTP {f.status}"},
                           [("Retry-After", str(int(f.seconds)))] if f.seconds else [])

    _limit_total = 60

    def _rate_headers(self) -> list[tuple[str, str]]:
        limited = self.rate_limit is not None
        total = self._limit_total if limited else 5000
        remaining = max(0, self.rate_limit or 0) if limited else 5000
        return [("X-RateLimit-Limit", str(total)), ("X-RateLimit-Remaining", str(remaining)),
                ("X-RateLimit-Used", str(total - remaining)), ("X-RateLimit-Reset", str(self.rate_limit_reset)),
                ("X-RateLimit-Resource", "core")]

    def set_rate_limit(self, remaining: int | None, *, total: int = 60, reset_at: int | None = None,
                       status: int = 403) -> None:
        """Allow ``remaining`` more API requests (``None``: unlimited), then answer ``status``."""
        with self._lock:
            self.rate_limit = remaining
            self._limit_total = total
            self.rate_limit_status = status
            self.rate_limit_reset = int(reset_at if reset_at is not None else time.time() + 3600)

    def _api(self, path: str, query: dict[str, list[str]], h: Headers, *, garble: bool = False) -> _Reply:
        segs = path.strip("/").split("/")
        body: Any
        if len(segs) == 5 and segs[3] == "attestations" and segs[4].startswith("sha256:"):
            answer = self._attestations(f"{segs[1]}/{segs[2]}", segs[4].removeprefix("sha256:"))
            if answer is None:
                return self._counted(_json_reply(404, {"message": "Not Found"}))
            return self._counted(_json_reply(200, answer, gz="gzip" in h.get("accept-encoding", "")))
        if len(segs) < 4 or segs[3] != "releases":
            return _json_reply(404, {"message": "Not Found"})
        repo = f"{segs[1]}/{segs[2]}"
        if self.rate_limit is not None and self.rate_limit <= 0:
            return _json_reply(self.rate_limit_status, {
                "message": "API rate limit exceeded for 127.0.0.1. (But here's the good news: "
                           "Authenticated requests get a higher rate limit.)"}, self._rate_headers())
        if len(segs) == 4:
            body, link = self._page(repo, query)
            extra = [("Link", link)] if link else []
        elif len(segs) >= 6 and segs[4] == "tags":
            rel = self._find(repo, "/".join(segs[5:]))
            if rel is None or rel.draft:
                return self._counted(_json_reply(404, {"message": "Not Found"}))
            body, extra = self._release_json(rel), []
        else:
            return _json_reply(404, {"message": "Not Found"})
        if not any(r.repo == repo for r in self._releases) and len(segs) == 4:
            return self._counted(_json_reply(404, {"message": "Not Found"}))
        data = json.dumps(body).encode()
        etag = f'W/"{hashlib.sha256(data).hexdigest()[:40]}"'
        common = [("ETag", etag), ("Cache-Control", "private, max-age=60, s-maxage=60"),
                  ("Vary", "Accept, Authorization, Cookie"), *extra]
        if h.get("if-none-match") == etag:
            return _Reply(304, common + self._rate_headers() + [("Content-Length", "0")])
        reply = _json_reply(200, body, common, gz=self.gzip_json and "gzip" in h.get("accept-encoding", ""),
                            garble=garble)
        return self._counted(reply)

    def _counted(self, reply: _Reply) -> _Reply:
        if self.rate_limit is not None:
            self.rate_limit -= 1
        reply.headers.extend(self._rate_headers())
        return reply

    def _page(self, repo: str, query: dict[str, list[str]]) -> tuple[list[dict[str, Any]], str | None]:
        def number(name: str, default: int) -> int:
            value = (query.get(name) or [""])[0]
            return int(value) if value.isdigit() else default

        per_page = min(100, max(1, number("per_page", self.default_per_page)))
        page = max(1, number("page", 1))
        listed = self._listed(repo)
        last = max(1, -(-len(listed) // per_page))
        items = [self._release_json(r) for r in listed[(page - 1) * per_page: page * per_page]]
        base = f"{self.url}/repos/{repo}/releases?per_page={per_page}&page="
        links = []
        if page < last:
            links += [f'<{base}{page + 1}>; rel="next"', f'<{base}{last}>; rel="last"']
        if page > 1:
            links += [f'<{base}{page - 1}>; rel="prev"', f'<{base}1>; rel="first"']
        return items, ", ".join(links) or None

    def _mirror(self, rest: str, h: Headers, fault: Fault | None) -> _Reply:
        for repo in sorted({r.repo for r in self._releases}):
            if rest == listing_path(repo):
                data = json.dumps([self._release_json(r) for r in self._listed(repo)], indent=1).encode()
                return self._file_reply(data, f'"{hashlib.sha256(data).hexdigest()[:32]}"', h, fault,
                                        content_type="application/json")
            for rel in self._listed(repo):
                for a in rel.assets.values():
                    if rest == asset_path(repo, rel.tag, a.name):
                        return self._file_reply(a.data, a.etag, h, fault)
                    if rest == asset_path(repo, rel.tag, a.name) + ".sigstore.json" and (
                            bundle := self._beside(repo, rel.tag, a.name)) is not None:
                        return self._file_reply(bundle, f'"{hashlib.sha256(bundle).hexdigest()[:32]}"', h, fault,
                                                content_type="application/json")
        return _Reply(404, [("Content-Length", "0")])

    def _file_reply(self, data: bytes, etag: str, h: Headers, fault: Fault | None,
                    content_type: str = "application/octet-stream") -> _Reply:
        kind = fault.kind if fault is not None else None
        if kind == "wrong_bytes" and fault is not None:  # one byte flipped: the first, or the one at ``after``
            at = min(fault.after, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:] if data else b"x"
        if h.get("if-none-match") == etag and kind is None:
            return _Reply(304, [("ETag", etag), ("Content-Length", "0")])
        common = [("ETag", etag), ("Last-Modified", formatdate(_EPOCH, usegmt=True)),
                  ("Accept-Ranges", "bytes"), ("Content-Type", content_type)]
        start = _range_start(h.get("range"))
        if_range = h.get("if-range")
        use_range = start is not None and kind != "ignore_range" and (if_range is None or if_range == etag)
        status, body = 200, data
        if use_range:
            assert start is not None
            if start >= len(data):
                return _Reply(416, [("Content-Range", f"bytes */{len(data)}"), ("Content-Length", "0")])
            shown = start + 1 if kind == "bad_range" else start
            status, body = 206, data[start:]
            common.append(("Content-Range", f"bytes {shown}-{len(data) - 1}/{len(data)}"))
        reply = _Reply(status, [*common, ("Content-Length", str(len(body)))], body)
        if kind in ("cut", "stall") and fault is not None:
            reply.cut_after = min(fault.after, len(body))
            reply.stall = fault.seconds if kind == "stall" else 0.0
        return reply

    # -- in memory ------------------------------------------------------------------------------

    def memory_fetcher(self, config: FetchConfig | None = None) -> Fetcher:
        """A fetcher that asks this server's state directly (no sockets): ``base`` is ``self.url``
        (which need not be started; unstarted, it is ``http://127.0.0.1:0``). A stall longer than
        the config's stall timeout raises at once instead of waiting."""
        if not self.url:
            self.url = "http://127.0.0.1:0"
        if self.object_store and not self.objects_url:
            self.objects_url = "http://127.0.0.1:1"
        return _MemoryFetcher(self, config)


def _range_start(value: str | None) -> int | None:
    if not value or not value.startswith("bytes="):
        return None
    first = value[len("bytes="):].split("-", 1)[0]
    return int(first) if first.isdigit() else None


def _json_reply(status: int, body: Any, headers: list[tuple[str, str]] | None = None, *, gz: bool = False,
                garble: bool = False) -> _Reply:
    data = json.dumps(body).encode()
    if garble:
        data = b"]" + data[1:]
    hdrs = [("Content-Type", "application/json; charset=utf-8"), *(headers or [])]
    if gz:
        data = gzip.compress(data)
        hdrs.append(("Content-Encoding", "gzip"))
    hdrs.append(("Content-Length", str(len(data))))
    return _Reply(status, hdrs, data)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real servers set it: the headers and the body are two writes, and with Nagle's
    # algorithm the second waits for the client's delayed ACK (~40 ms for every small answer)
    disable_nagle_algorithm = True
    fake: ReleaseServer
    server_name_: str

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")

    def _handle(self, method: str) -> None:
        reply = self.fake.respond(self.server_name_, method, self.path, dict(self.headers.items()))
        if reply.status == 0:  # drop: no answer at all
            self.close_connection = True
            self._hard_close()
            return
        self.send_response(reply.status)
        for k, v in reply.headers:
            self.send_header(k, v)
        if reply.cut_after is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        if method == "HEAD":
            return
        if reply.cut_after is None:
            self.wfile.write(reply.body)
            return
        self.wfile.write(reply.body[: reply.cut_after])
        self.wfile.flush()
        if reply.stall:
            self.fake._stop.wait(reply.stall)
        self.close_connection = True
        self._hard_close()

    def _hard_close(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _MemoryFetcher(Fetcher):
    """The fetcher seam answered from a ``ReleaseServer``'s state, without sockets."""

    def __init__(self, fake: ReleaseServer, config: FetchConfig | None = None) -> None:
        super().__init__(config)
        self.fake = fake

    def _send(self, request: HttpRequest) -> FetchResponse:
        url, headers = request.url, request.headers
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        server = "objects" if self.fake.objects_url and origin == self.fake.objects_url else "api"
        if origin not in (self.fake.url, self.fake.objects_url):
            raise DownloadError(url, "could not connect: no such host in memory", retryable=True)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        reply = self.fake.respond(server, request.method, target, headers)
        if reply.status == 0:
            raise DownloadError(url, "connection closed without an answer", retryable=True)
        body = reply.body
        if ("Content-Encoding", "gzip") in reply.headers and headers.get("Accept-Encoding", "identity") != "identity":
            body = gzip.decompress(body)
        stall_timeout = self.config.stall_timeout

        def chunks() -> Iterator[bytes]:
            if reply.cut_after is None:
                for i in range(0, len(body), self.config.chunk_size):
                    yield body[i: i + self.config.chunk_size]
                return
            if reply.cut_after:
                yield body[: reply.cut_after]
            if reply.stall:
                if reply.stall >= stall_timeout:
                    raise DownloadStalled(url, stall_timeout, received=reply.cut_after)
                time.sleep(reply.stall)
            raise DownloadError(url, f"connection broken after {reply.cut_after} bytes", retryable=True)

        return FetchResponse(url, reply.status, Headers(reply.headers), chunks())
