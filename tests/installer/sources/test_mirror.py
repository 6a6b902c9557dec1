"""Mirrors (HTTP and directory) and the offline source, through ``source_for``.

A mirror changes where bytes come from, never which digests are accepted; offline never opens a
connection and says what it lacks.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import OfflineMissing, ReleaseNotFound, SizeExceeded, VerificationError
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.github import GitHubClient
from superfluid.installer.sources.mirror import Mirror, asset_path, listing_path, mirror_root_url
from superfluid.installer.sources.release_source import ListedSource, OfflineSource
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.fixes import Fix
from tests.installer.conftest import REPO
from tests.release_server import ReleaseServer, sha256_line
from tests.settings_from import settings_from

BUNDLE = "basert-engine-linux-x64-0.4.0.tar.gz"
DATA = os.urandom(200_000)
SHA = hashlib.sha256(DATA).hexdigest()
FAST = FetchConfig(retries=1, backoff_base=0.01, stall_timeout=2)


@pytest.fixture
def upstream(release_server: ReleaseServer) -> ReleaseServer:
    """The GitHub the mirrors copy: 0.3.0, 0.4.0 (``BUNDLE`` and its ABI asset) and a draft 0.5.0."""
    release_server.add_release(REPO, "v0.3.0", {"basert-engine-linux-x64-0.3.0.tar.gz": b"old"}, sha256_files=True)
    release_server.add_release(REPO, "v0.4.0", {BUNDLE: DATA, "basert-engine-abi-1.txt": b"1\n"}, sha256_files=True)
    release_server.add_release(REPO, "v0.5.0", {"x": b"x"}, draft=True)
    return release_server


def env(home: Path, **extra: str) -> dict[str, str]:
    return {"SUPERFLUID_HOME": str(home), **extra}


class TestLayout:
    def test_paths(self) -> None:
        assert listing_path(REPO) == "basecompute/baseRT/releases.json"
        assert asset_path(REPO, "v0.4.0", BUNDLE) == f"basecompute/baseRT/releases/download/v0.4.0/{BUNDLE}"

    def test_root_url(self, tmp_path: Path) -> None:
        assert mirror_root_url("https://m.test/base") == "https://m.test/base/"
        assert mirror_root_url(str(tmp_path)) == tmp_path.resolve().as_uri() + "/"
        assert mirror_root_url(tmp_path.as_uri()) == tmp_path.as_uri() + "/"
        with pytest.raises(ValueError, match="no such directory"):
            mirror_root_url(str(tmp_path / "missing"))
        with pytest.raises(ValueError, match=r"not a mirror \(a mirror is a directory, or a URL of http://, "
                                             r"https://, file:// or oci://\)"):
            mirror_root_url("ftp://m.test/")


class TestHttpMirror:
    def test_lists_and_fetches_from_the_mirror_only(self, upstream: ReleaseServer, home: Path) -> None:
        source = source_for(settings_from(env(home), mirror=upstream.mirror_url, offline=False, config=FAST))
        assert isinstance(source, ListedSource) and isinstance(source.lister, Mirror)
        assert source.describe() == f"mirror {upstream.mirror_url}" and source.mirror == upstream.mirror_url
        rels = source.releases(REPO)
        assert [r.tag for r in rels] == ["v0.4.0", "v0.3.0"]  # the draft is skipped
        asset = rels[0].asset(BUNDLE)
        assert asset is not None and asset.url == upstream.mirror_url + asset_path(REPO, "v0.4.0", BUNDLE)
        assert source.read(rels[0].asset(f"{BUNDLE}.sha256")) == sha256_line(BUNDLE, DATA)  # type: ignore[arg-type]
        d = source.fetch(asset, sha256=asset.sha256)
        assert d.path.read_bytes() == DATA
        assert all(r.path.startswith("/mirror/") for r in upstream.log)

    def test_environment_names_the_mirror(self, upstream: ReleaseServer, home: Path) -> None:
        source = source_for(settings_from(env(home, SUPERFLUID_MIRROR=upstream.mirror_url), mirror=None, offline=False))
        assert isinstance(source, ListedSource) and isinstance(source.lister, Mirror) and source.releases(REPO)

    def test_mirror_serving_other_bytes_is_refused(self, upstream: ReleaseServer, home: Path) -> None:
        upstream.fault(upstream.mirror_path(REPO, "v0.4.0", BUNDLE), "wrong_bytes")
        source = source_for(settings_from(env(home), mirror=upstream.mirror_url, offline=False, config=FAST))
        asset = source.release(REPO, "v0.4.0").asset(BUNDLE)
        assert asset is not None
        with pytest.raises(VerificationError, match=f"expected {SHA}"):
            source.fetch(asset, sha256=SHA)  # the pin, not whatever the mirror would like
        assert not Cache.for_home(home).blobs.blob_path(SHA).exists()

    def test_listing_is_a_conditional_request(self, upstream: ReleaseServer, home: Path) -> None:
        source = source_for(settings_from(env(home), mirror=upstream.mirror_url, offline=False, config=FAST))
        source.releases(REPO)
        upstream.clear_log()
        source.releases(REPO)
        assert [r.status for r in upstream.log] == [304]

    def test_no_listing_for_the_repo(self, upstream: ReleaseServer, home: Path) -> None:
        source = source_for(settings_from(env(home), mirror=upstream.mirror_url, offline=False, config=FAST))
        with pytest.raises(ReleaseNotFound, match="listing ggml-org/llama.cpp/releases.json not found"):
            source.releases("ggml-org/llama.cpp")
        with pytest.raises(ReleaseNotFound, match="release v9"):
            source.release(REPO, "v9")

    def test_bad_mirror_flag_is_a_usage_error(self, home: Path) -> None:
        with pytest.raises(UsageError, match="no such directory"):
            source_for(settings_from(env(home), mirror=str(home / "nope"), offline=False))


class TestDirectoryMirror:
    def test_reads_in_place_with_no_http_at_all(self, upstream: ReleaseServer, home: Path, tmp_path: Path,
                                                no_sockets: list[object]) -> None:
        root = upstream.write_mirror(tmp_path / "mirror")
        upstream.clear_log()
        for offline in (False, True):  # a directory needs no connection, so --offline reads it too
            source = source_for(settings_from(env(home), mirror=str(root), offline=offline))
            assert isinstance(source, ListedSource) and source.mirror == root.resolve().as_uri() + "/"
            rels = source.releases(REPO)
            assert [r.tag for r in rels] == ["v0.4.0", "v0.3.0"]
            asset = rels[0].asset(BUNDLE)
            assert asset is not None and asset.url.startswith("file://")
            assert source.fetch(asset, sha256=SHA).path.read_bytes() == DATA
            assert source.read(rels[0].asset("basert-engine-abi-1.txt")) == b"1\n"  # type: ignore[arg-type]
        assert no_sockets == [] and upstream.log == []

    def test_a_hostile_listing_entry_is_skipped_by_name(self, tmp_path: Path, home: Path) -> None:
        listing = tmp_path / "m" / listing_path(REPO)
        listing.parent.mkdir(parents=True)
        listing.write_text(json.dumps([{"tag_name": "../../..", "assets": []}, {"tag_name": "v1", "assets": None},
                                       {"tag_name": "v0", "assets": []}]))
        source = source_for(settings_from(env(home), mirror=str(tmp_path / "m"), offline=False))
        assert [r.tag for r in source.releases(REPO)] == ["v0"]
        first, second = source.warnings
        assert first.endswith("releases.json: release '../../..' ($[0]) skipped: $[0].tag_name: "
                              "not a usable tag: '../../..'")
        assert second.endswith("releases.json: release 'v1' ($[1]) skipped: $[1].assets: expected list, got NoneType")

    def test_a_listing_that_is_no_array_is_refused_by_name(self, tmp_path: Path, home: Path) -> None:
        listing = tmp_path / "m" / listing_path(REPO)
        listing.parent.mkdir(parents=True)
        listing.write_text(json.dumps({"tag_name": "v1"}))
        source = source_for(settings_from(env(home), mirror=str(tmp_path / "m"), offline=False))
        with pytest.raises(BadFile, match="expected a JSON array") as e:
            source.releases(REPO)
        assert e.value.json_path == "$" and e.value.path.endswith("releases.json")


class TestOffline:
    def test_cold_cache_says_what_it_lacks_and_never_connects(self, upstream: ReleaseServer, home: Path,
                                                              no_sockets: list[object]) -> None:
        fix = Fix.superfluid("runtime", "install", "basert", does="fills the cache")
        environ = env(home, SUPERFLUID_GITHUB_API=upstream.url)
        source = source_for(settings_from(environ, mirror=None, offline=True), fix=fix)
        assert isinstance(source, OfflineSource)
        with pytest.raises(OfflineMissing) as e:
            source.releases(REPO)
        assert "offline: the cache holds no release listing" in str(e.value) and e.value.fixes == (fix,)
        asset = source.asset(REPO, "v0.4.0", BUNDLE, size=len(DATA), sha256=SHA)
        with pytest.raises(OfflineMissing, match=f"no download of {BUNDLE}"):
            source.fetch(asset, sha256=SHA)
        assert no_sockets == [] and upstream.log == []

    def test_warm_cache_serves_everything_without_a_connection(self, upstream: ReleaseServer, home: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
        environ = env(home, SUPERFLUID_GITHUB_API=upstream.url)
        online = source_for(settings_from(environ, mirror=None, offline=False, config=FAST))
        assert isinstance(online, ListedSource) and isinstance(online.lister, GitHubClient)
        rel = online.releases(REPO)[0]
        sidecar = rel.asset(f"{BUNDLE}.sha256")
        bundle = rel.asset(BUNDLE)
        assert sidecar is not None and bundle is not None
        online.read(sidecar)
        online.fetch(bundle, sha256=None)
        online.release(REPO, "v0.3.0")
        upstream.clear_log()

        import socket

        opened: list[object] = []
        monkeypatch.setattr(socket.socket, "connect", lambda self, addr: opened.append(addr))
        offline = source_for(settings_from(environ, mirror=None, offline=True, config=FAST))
        rels = offline.releases(REPO)
        assert [r.tag for r in rels] == ["v0.4.0", "v0.3.0"]
        assert offline.read(sidecar) == sha256_line(BUNDLE, DATA)
        assert offline.fetch(bundle, sha256=SHA).path.read_bytes() == DATA
        assert offline.fetch(bundle, sha256=None).sha256 == SHA  # found by URL
        assert offline.release(REPO, "v0.3.0").tag == "v0.3.0"
        assert offline.release(REPO, "v0.4.0").tag == "v0.4.0"  # never asked by tag: from the listing
        assert offline.fetch_many([(bundle, SHA)])[0].cached
        assert opened == [] and upstream.log == []

    def test_offline_http_mirror_reads_its_cache(self, upstream: ReleaseServer, home: Path,
                                                 no_sockets: list[object]) -> None:
        with pytest.raises(OfflineMissing, match="release listing"):
            source_for(settings_from(env(home), mirror=upstream.mirror_url, offline=True)).releases(REPO)
        assert no_sockets == [] and upstream.log == []


def test_memory_fetcher_answers_as_the_loopback_server_does(upstream: ReleaseServer, tmp_path: Path) -> None:
    """The same state through the seam in memory (fast unit tests for the resolver) and on loopback."""
    from superfluid.installer.sources.github import GitHubClient

    memory = GitHubClient(upstream.memory_fetcher(FAST), Cache(tmp_path / "a"), api_base=upstream.url)
    loop = source_for(settings_from({"SUPERFLUID_HOME": str(tmp_path / "b"), "SUPERFLUID_GITHUB_API": upstream.url},
                                    mirror=None, offline=False, config=FAST))
    assert memory.releases(REPO) == loop.releases(REPO)
    upstream.fault(upstream.download_path(REPO, "v0.4.0", BUNDLE), "cut", after=1000)
    from superfluid.installer.cache.download import download

    asset = memory.release(REPO, "v0.4.0").asset(BUNDLE)
    assert asset is not None
    d = download(asset.url, SHA, asset.size, cache=Cache(tmp_path / "a"), fetcher=memory.fetcher)
    assert d.path.read_bytes() == DATA


class TestRead:
    def test_a_garbled_sidecar_is_not_kept(self, upstream: ReleaseServer, home: Path) -> None:
        source = source_for(settings_from(env(home, SUPERFLUID_GITHUB_API=upstream.url), mirror=None, offline=False,
                                          config=FAST))
        sidecar = source.release(REPO, "v0.4.0").asset(f"{BUNDLE}.sha256")
        assert sidecar is not None and sidecar.sha256 is not None
        path = upstream.download_path(REPO, "v0.4.0", f"{BUNDLE}.sha256")
        upstream.fault(path, "wrong_bytes")
        assert source.read(sidecar) != sha256_line(BUNDLE, DATA)  # the caller sees the digest disagree
        assert source.read(sidecar) == sha256_line(BUNDLE, DATA)  # and the next read is clean
        upstream.clear_log()
        assert source.read(sidecar) == sha256_line(BUNDLE, DATA) and upstream.log == []  # by content

    def test_a_sidecar_without_a_listed_digest_is_revalidated(self, release_server: ReleaseServer,
                                                              home: Path) -> None:
        release_server.add_release(REPO, "v0.3.1", {"basert-engine-abi-1.txt": b"1\n"}, digests=False)
        source = source_for(settings_from(env(home, SUPERFLUID_GITHUB_API=release_server.url), mirror=None,
                                          offline=False, config=FAST))
        abi = source.release(REPO, "v0.3.1").asset("basert-engine-abi-1.txt")
        assert abi is not None and abi.sha256 is None
        assert source.read(abi) == source.read(abi) == b"1\n"
        assert [r.status for r in release_server.requests_to(f"/{REPO}/")] == [200, 304]

    def test_too_big_to_be_a_sidecar(self, upstream: ReleaseServer, home: Path) -> None:
        source = source_for(settings_from(env(home, SUPERFLUID_GITHUB_API=upstream.url), mirror=None, offline=False))
        bundle = source.release(REPO, "v0.4.0").asset(BUNDLE)
        assert bundle is not None
        with pytest.raises(SizeExceeded):
            source.read(bundle)
        assert upstream.requests_to(f"/{REPO}/") == []
