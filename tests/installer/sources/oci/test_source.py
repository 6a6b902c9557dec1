"""``installer/sources/oci/source``: a registry as a mirror. After a real push to a real registry on
loopback, ``--mirror oci://`` lists the lock's releases and fetches each file as the blob of its
digest; offline it is the cache alone; a repository never pushed is named with the push that fills
it; and which registry a ``--locked`` install reads (the named one, else the lock's own, else none),
each file the blob of the digest the fetch is given (no index read)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from superfluid.installer.errors import OfflineMissing, ReleaseNotFound
from superfluid.installer.fleet.lockfile import Lock, LockedFile
from superfluid.installer.fleet.push import push
from superfluid.installer.fleet.sync import files_of
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.oci.ref import parse_ref
from superfluid.installer.sources.oci.source import OciListing, locked_source
from superfluid.installer.sources.release_source import ListedSource, OfflineSource
from superfluid.runtime.kernel.fixes import Fix
from tests.conftest import Home
from tests.fleet.registry import Registry
from tests.installer.conftest import LOCKED_REPO
from tests.settings_from import settings_from


@pytest.fixture
def pushed(file_lock: Lock, registry: Registry, cli_home: Home) -> Registry:
    """The registry holding everything ``file_lock`` names."""
    push(file_lock, parse_ref(registry.url), settings_from(cli_home.env))
    return registry


def test_the_registry_lists_the_locks_releases_and_serves_their_files(file_lock: Lock, pushed: Registry,
                                                                      cli_home: Home) -> None:
    source = source_for(settings_from(cli_home.env, mirror=pushed.url, offline=False))
    try:
        assert isinstance(source, ListedSource) and isinstance(source.lister, OciListing)
        assert pushed.host in source.describe() and source.mirror == f"{pushed.url}/"
        releases = {r.tag: r for r in source.releases(LOCKED_REPO)}
        assert sorted(releases) == ["v0.3.1", "v0.4.0"]
        cpu = next(a for a in releases["v0.4.0"].assets if a.name == "engine-cpu.tar.gz")
        got = source.fetch(cpu, sha256=cpu.sha256)
        assert hashlib.sha256(got.path.read_bytes()).hexdigest() == cpu.sha256
    finally:
        source.close()


def test_offline_the_registry_is_the_cache_alone(pushed: Registry, cli_home: Home) -> None:
    source = source_for(settings_from(cli_home.env, mirror=pushed.url, offline=True),
                        fix=Fix.superfluid("runtime", "install", "basert", does="fills the cache"))
    assert isinstance(source, OfflineSource) and isinstance(source.lister, OciListing)
    pushed.clear_log()
    with pytest.raises(OfflineMissing):
        source.releases(LOCKED_REPO)
    assert pushed.log() == []  # no connection opened


def test_a_repository_never_pushed_names_the_push(pushed: Registry, cli_home: Home) -> None:
    source = source_for(settings_from(cli_home.env, mirror=pushed.url, offline=False))
    try:
        with pytest.raises(ReleaseNotFound) as e:
            source.releases("ggml-org/llama.cpp")
        assert e.value.advice is not None and "mirror push" in e.value.advice and e.value.fixes == ()
    finally:
        source.close()


def _in_registry(lock: Lock, registry: Registry) -> Lock:
    """``lock`` with every URL the ``oci://`` URL of its file in ``registry`` (as a lock of a registry records)."""
    def moved(f: LockedFile) -> LockedFile:
        return replace(f, url=f"{registry.url}/{f.path}")

    return replace(lock, engines=tuple(
        replace(e, assets=tuple(moved(a) for a in e.assets), evidence=tuple(moved(a) for a in e.evidence))
        for e in lock.engines))


@pytest.mark.parametrize(("root", "from_lock", "reads"), [
    pytest.param(None, False, None, id="plain-urls-no-registry"),
    pytest.param("REGISTRY", False, "REGISTRY", id="the-named-registry"),
    pytest.param(None, True, "REGISTRY", id="the-locks-own-registry"),
    pytest.param("/srv/mirror", True, None, id="a-directory-mirror-wins-over-the-locks-registry"),
])
def test_which_registry_a_locked_install_reads(file_lock: Lock, registry: Registry, cli_home: Home,
                                               root: str | None, from_lock: bool, reads: str | None) -> None:
    lock = _in_registry(file_lock, registry) if from_lock else file_lock
    files = [f for e in lock.engines for f in e.files()]
    source = locked_source(registry.url if root == "REGISTRY" else root, files, settings_from(cli_home.env))
    try:
        if reads is None:
            assert source is None
        else:
            assert isinstance(source, ListedSource) and isinstance(source.lister, OciListing)
            assert registry.host in source.describe()
    finally:
        if source is not None:
            source.close()


def test_a_locked_file_is_fetched_as_the_blob_of_its_digest(file_lock: Lock, pushed: Registry,
                                                            cli_home: Home) -> None:
    lock = _in_registry(file_lock, pushed)
    source = locked_source(None, [f for e in lock.engines for f in e.files()], settings_from(cli_home.env))
    assert source is not None
    try:
        (_, _, f) = next(x for x in files_of(lock) if x[2].name == "engine-cuda.tar.gz")
        asset = source.asset(LOCKED_REPO, "v0.4.0", f.name, size=f.size, sha256=f.sha256)
        assert source.fetch(asset, sha256=f.sha256).path.read_bytes() == b"cuda engine"
        pushed.clear_log()  # the bytes as a streamed install asks them (the push left them in the cache)
        _, data = source.fetcher_of({asset.url: f.sha256}).get_bytes(asset.url, max_bytes=1 << 20)
        assert data == b"cuda engine"
        asked = {a.path for a in pushed.log() if a.status != 401}
        assert asked == {f"/v2/{parse_ref(pushed.url).repository}/blobs/sha256:{f.sha256}"}  # no index read
    finally:
        source.close()
