"""A fifth release source is one module and one line (issue 43, point 3), as a fourth engine is its folder
and one registry line: below, a source of a kind superfluid does not ship (a plain static HTTP server
holding a ``releases.json`` of its own shape, nothing shaped as GitHub's API or a mirror's layout) is
written as docs/architecture.md says (a lister, composed with a fetcher by ``ListedSource`` or
``OfflineSource``, and a factory), registered by one line in ``choose.SCHEMES``, and a real install of
the reference engine goes through it end to end: ``--mirror flat://HOST:PORT/`` lists, reads the small
files, fetches the archive by its digest into the cache, probes and publishes, and the receipt records
the archive's URL and digest and the mirror it came from. Offline, the same source is the cache alone."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.cache.conditional import cached_get
from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import ReleaseNotFound
from superfluid.installer.install import install
from superfluid.installer.settings import Settings
from superfluid.installer.sources import choose
from superfluid.installer.sources.release import Asset, Release
from superfluid.installer.sources.release_source import ListedSource, OfflineSource, ReleaseSource
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import NoNetworkFetcher
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.receipt import read_receipt
from superfluid.runtime.planning import Request
from tests.conftest import Home
from tests.end_to_end.releases import bundle_name, release_assets
from tests.release_server import sha256_line
from tests.settings_from import settings_from
from tests.threaded_server import serving

REPO = "basecompute/baseRT"
VERSION = "0.4.0"

# -- the fifth source: one module (these lines) -------------------------------------------------------


class FlatListing:
    """A static server's ``releases.json``: ``{"owner/repo": {"<version>": {"<file>": {"sha256", "size"}}}}``,
    each file at ``<root><version>/<file>``."""

    def __init__(self, root: str, fetcher: Fetcher, cache: Cache, *, offline: bool = False) -> None:
        self.root, self.fetcher, self.cache, self.offline = root, fetcher, cache, offline
        self.warnings: list[str] = []

    def describe(self) -> str:
        return f"flat releases at {self.root}"

    def asset_url(self, repo: str, tag: str, name: str) -> str:
        return f"{self.root}{tag.removeprefix('v')}/{name}"

    def releases(self, repo: str) -> list[Release]:
        got = cached_get(self.root + "releases.json", fetcher=self.fetcher, cache=self.cache, max_bytes=1 << 20,
                         offline=self.offline, what="flat listing")
        versions: Mapping[str, Mapping[str, Mapping[str, Any]]] = json.loads(got.body).get(repo, {})
        return [Release(tag=f"v{v}", version=v, name=v, draft=False, prerelease=False, published_at=None,
                        assets=tuple(Asset(n, self.asset_url(repo, v, n), f["size"], f"sha256:{f['sha256']}")
                                     for n, f in files.items()))
                for v, files in versions.items()]

    def release(self, repo: str, tag: str) -> Release:
        found = next((r for r in self.releases(repo) if r.tag == tag), None)
        if found is None:
            raise ReleaseNotFound(repo, f"release {tag}", where=self.root)
        return found


def flat_source(where: str, *, named_by: str, offline: bool, settings: Settings, config: FetchConfig,
                cache: Cache, fix: str | None, fetcher: Fetcher | None) -> ReleaseSource:
    """``flat://HOST:PORT/PATH``: the static server at ``http://HOST:PORT/PATH``."""
    if where.count("/") < 3:
        raise UsageError(f"{named_by} {where}: not flat://HOST:PORT/", advice="name the server: flat://HOST:PORT/")
    root = "http://" + where.split("://", 1)[1].rstrip("/") + "/"
    if offline:
        return OfflineSource(FlatListing(root, NoNetworkFetcher(config), cache, offline=True), cache, config=config,
                             fix=fix, mirror=where)
    net = fetcher or RequestsFetcher(config, plain_http_origins=[root])
    return ListedSource(FlatListing(root, net, cache), cache, net, mirror=where)


# -- the one line ---------------------------------------------------------------------------------------


@pytest.fixture
def flat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(choose.SCHEMES, "flat", flat_source)


# -- a plain static server ------------------------------------------------------------------------------


class Static:
    """A folder served by ``http.server`` on loopback: ``releases.json`` and ``<version>/<file>``; the
    paths asked, in order."""

    def __init__(self, folder: Path, assets: Mapping[str, bytes]) -> None:
        self.folder, self.assets = folder, dict(assets)
        self.asked: list[str] = []
        self._lock = threading.Lock()
        listing = {REPO: {VERSION: {n: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                                    for n, d in self.assets.items()}}}
        (folder / VERSION).mkdir(parents=True)
        (folder / "releases.json").write_text(json.dumps(listing))
        for name, data in self.assets.items():
            (folder / VERSION / name).write_bytes(data)

    def handler(self, *args: Any, **kwargs: Any) -> SimpleHTTPRequestHandler:
        static = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                with static._lock:
                    static.asked.append(self.path)

        return Handler(*args, directory=str(self.folder), **kwargs)


@pytest.fixture
def static(tmp_path: Path) -> Iterator[tuple[Static, str]]:
    """The reference engine's release 0.4.0 (its bundle, ``.sha256`` and ABI asset) on a static server,
    and the ``flat://`` URL of it."""
    bundle = bundle_name(VERSION)
    assets = release_assets(VERSION, 1)
    assets[f"{bundle}.sha256"] = sha256_line(bundle, assets[bundle])
    files = Static(tmp_path / "static", assets)
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Static.handler, files))) as port:
        yield files, f"flat://127.0.0.1:{port}/"


def test_an_install_through_a_fifth_source(flat: None, static: tuple[Static, str], cli_home: Home) -> None:
    files, where = static
    bundle = bundle_name(VERSION)
    data = files.assets[bundle]
    sha = hashlib.sha256(data).hexdigest()

    done = install(Request.parse("basert"), settings_from(cli_home.env, mirror=where))

    assert done.source == f"flat releases at http://{where.removeprefix('flat://')}"
    receipt = done.receipt
    assert receipt is not None and done.path is not None and receipt.install == f"{VERSION}-cpu"
    assert [(s.url, s.sha256) for s in receipt.sources] == [(f"http://{where.removeprefix('flat://')}{VERSION}/"
                                                             f"{bundle}", sha)]
    assert receipt.extra["mirror"] == where and receipt.chosen_by == "abi" and receipt.abi == 1
    assert read_receipt(Path(done.path) / "runtime.json") == receipt
    assert cli_home.installs() == [f"{VERSION}-cpu"]
    blob = Cache.for_home(cli_home.path).blobs.find_blob(sha)
    assert blob is not None and blob.read_bytes() == data  # the verified bytes, kept by their digest
    # the static server was asked its own paths alone: nothing of GitHub's API or a mirror's layout
    assert "/releases.json" in files.asked and f"/{VERSION}/{bundle}" in files.asked
    assert all(p == "/releases.json" or p.startswith(f"/{VERSION}/") for p in files.asked)


def test_offline_the_fifth_source_is_the_cache_alone(flat: None, static: tuple[Static, str], cli_home: Home) -> None:
    files, where = static
    install(Request.parse("basert"), settings_from(cli_home.env, mirror=where), dry_run=True)  # the cache filled
    files.asked.clear()
    planned = install(Request.parse("basert"), settings_from(cli_home.env, mirror=where, offline=True), dry_run=True)
    assert planned.source.startswith("the cache at ") and files.asked == []
    assert [p.install for p in planned.plans][:1] == [f"{VERSION}-cpu"]


def test_a_bad_name_of_the_fifth_source_is_its_usage_error(flat: None, cli_home: Home) -> None:
    with pytest.raises(UsageError, match="not flat://HOST:PORT/"):
        install(Request.parse("basert"), settings_from(cli_home.env, mirror="flat://"))
