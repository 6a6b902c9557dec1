"""``installer/sources``: which source a command gets (``--mirror``, ``SUPERFLUID_MIRROR``, GitHub,
``--offline``), what it refuses, a URL's ``user:password@`` sent to its origin only, the small-asset
cap before any request, the offline source answering from the cache alone, and each fetch of a composed
source given the digest it expects. Listing and fetching over loopback are
tests/installer/sources/test_mirror.py and test_github.py; a source of a new kind, test_fifth_source.py."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import pytest

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import OfflineMissing, SizeExceeded
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.github import GitHubClient
from superfluid.installer.sources.mirror import Mirror
from superfluid.installer.sources.release import Asset
from superfluid.installer.sources.release_source import (
    ListedSource,
    OfflineSource,
    ReleaseSource,
    basic_credential,
    fetcher_for,
)
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.files import FileFetcher, NoNetworkFetcher
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.installer.transport.urls import origin_of
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix
from tests.settings_from import settings_from

#: the fix a command hands its source: what fills the cache when --offline lacks something
ONLINE = Fix.superfluid("runtime", "install", "basert", does="fills the cache")


def pick(tmp_path: Path, mirror: str | None, offline: bool, **env: str) -> ReleaseSource:
    return source_for(settings_from({"SUPERFLUID_HOME": str(tmp_path / "home"), **env}, mirror=mirror, offline=offline))


# --- which source ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mirror", "offline", "env", "kind", "lister", "fetcher"), [
    pytest.param(None, False, {}, ListedSource, GitHubClient, RequestsFetcher, id="github"),
    pytest.param(None, True, {}, OfflineSource, GitHubClient, NoNetworkFetcher, id="github-offline"),
    pytest.param("https://m.example/r", False, {}, ListedSource, Mirror, RequestsFetcher, id="http-mirror"),
    pytest.param("https://m.example/r", True, {}, OfflineSource, Mirror, NoNetworkFetcher, id="http-mirror-offline"),
    pytest.param("DIR", False, {}, ListedSource, Mirror, FileFetcher, id="directory-mirror"),
    pytest.param("DIR", True, {}, ListedSource, Mirror, FileFetcher, id="directory-mirror-is-read-in-place-offline"),
    pytest.param(None, False, {"SUPERFLUID_MIRROR": "https://m.example/r"}, ListedSource, Mirror, RequestsFetcher,
                 id="variable"),
    pytest.param(None, False, {"SUPERFLUID_MIRROR": ""}, ListedSource, GitHubClient, RequestsFetcher,
                 id="empty-variable-unset"),
    pytest.param("DIR", False, {"SUPERFLUID_MIRROR": "https://m.example/r"}, ListedSource, Mirror, FileFetcher,
                 id="flag-before-variable"),
])
def test_which_source(tmp_path: Path, mirror: str | None, offline: bool, env: dict[str, str],
                      kind: type[ReleaseSource], lister: type[object], fetcher: type[object]) -> None:
    (tmp_path / "mirror").mkdir()
    source = pick(tmp_path, str(tmp_path / "mirror") if mirror == "DIR" else mirror, offline, **env)
    try:
        assert isinstance(source, (ListedSource, OfflineSource))
        assert type(source) is kind and type(source.lister) is lister and type(source.fetcher) is fetcher
        assert source.offline is (kind is OfflineSource)
        assert source.mirror == (None if lister is GitHubClient else source.lister.root)  # type: ignore[attr-defined]
    finally:
        source.close()


def test_describe_names_the_place(tmp_path: Path) -> None:
    assert pick(tmp_path, "https://m.example/r", False).describe() == "mirror https://m.example/r/"
    offline = pick(tmp_path, None, True)
    assert offline.describe().startswith(f"the cache at {tmp_path / 'home' / 'cache'} (offline; ")


@pytest.mark.parametrize(("mirror", "env", "named"), [
    pytest.param("ftp://m.example/r", {}, "--mirror", id="another-scheme"),
    pytest.param("NOPE", {}, "--mirror", id="no-such-directory"),
    pytest.param("FILE", {}, "--mirror", id="a-file"),
    pytest.param(None, {"SUPERFLUID_MIRROR": "ftp://m.example/r"}, "SUPERFLUID_MIRROR", id="the-variable"),
    pytest.param("oci://", {}, "", id="an-oci-url-without-repository"),
])
def test_a_bad_mirror_is_a_usage_error(tmp_path: Path, mirror: str | None, env: dict[str, str], named: str) -> None:
    (tmp_path / "file").write_text("")
    given = {"NOPE": str(tmp_path / "nope"), "FILE": str(tmp_path / "file")}.get(mirror or "", mirror)
    with pytest.raises(UsageError) as e:
        pick(tmp_path, given, False, **env)
    assert named in e.value.message and e.value.advice
    assert not (tmp_path / "home").exists()  # nothing made for a refused source


def test_a_bad_mirrors_password_is_not_repeated(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        pick(tmp_path, "ftp://u:s3cret@m.example/r", False)
    assert "s3cret" not in str(e.value)


@pytest.mark.parametrize("api", ["ftp://api.example", "api.example", "file:///tmp"])
def test_a_github_api_that_is_not_http(tmp_path: Path, api: str) -> None:
    with pytest.raises(UsageError, match="SUPERFLUID_GITHUB_API"):
        pick(tmp_path, None, False, SUPERFLUID_GITHUB_API=api)


def test_a_mirrors_userinfo_goes_to_its_origin_only(tmp_path: Path) -> None:
    source = pick(tmp_path, "https://u:p%40w@m.example:8443/r", False)
    assert source.describe() == "mirror https://m.example:8443/r/"  # the secret is not in the place shown
    assert isinstance(source, ListedSource)
    credential = source.fetcher.credential
    assert credential is not None and credential.origin == "https://m.example:8443"
    assert "p@w" not in repr(credential) and source.mirror == "https://m.example:8443/r/"  # the root a receipt records


# --- credentials in a URL ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "clean", "origin", "basic"), [
    pytest.param("https://h.example/x", "https://h.example/x", None, None, id="none"),
    pytest.param("https://u:p@h.example/x", "https://h.example/x", "https://h.example", "dTpw", id="user-password"),
    pytest.param("https://u@h.example:8443/x", "https://h.example:8443/x", "https://h.example:8443", "dTo=",
                 id="user-alone"),
    pytest.param("https://u%40x:p%3Aw@h.example/", "https://h.example/", "https://h.example", "dUB4OnA6dw==",
                 id="quoted"),
    pytest.param("http://u:p@[::1]:5000/r", "http://[::1]:5000/r", "http://[::1]:5000", "dTpw", id="ipv6"),
])
def test_basic_credential(url: str, clean: str, origin: str | None, basic: str | None) -> None:
    got_url, credential = basic_credential(url)
    assert got_url == clean
    if origin is None:
        assert credential is None
    else:
        assert credential is not None and (credential.origin, credential.authorization) == (origin, f"Basic {basic}")


@pytest.mark.parametrize(("url", "kind", "has_credential"), [
    pytest.param("file:///tmp/x.tar.gz", FileFetcher, False, id="file"),
    pytest.param("https://h.example/x.tar.gz", RequestsFetcher, False, id="https"),
    pytest.param("https://u:p@h.example/x.tar.gz", RequestsFetcher, True, id="https-with-userinfo"),
])
def test_fetcher_for(url: str, kind: type[object], has_credential: bool) -> None:
    fetcher = fetcher_for(url)
    assert type(fetcher) is kind
    assert (getattr(fetcher, "credential", None) is not None) is has_credential


@pytest.mark.parametrize("url", [
    pytest.param("http://127.0.0.1:9/x.tar.gz", id="loopback"),
    pytest.param("http://u:p@127.0.0.1:9/x.tar.gz", id="loopback-with-userinfo"),
    pytest.param("https://h.example/x.tar.gz", id="elsewhere"),
])
def test_fetcher_for_plain_http_allows_that_origin(url: str) -> None:
    fetcher = fetcher_for(url, plain_http=True)
    assert type(fetcher) is RequestsFetcher
    assert (fetcher.credential is not None) is ("u:p@" in url)
    assert fetcher.plain_http_origins == {origin_of(url.replace("u:p@", ""))}


# --- reading and fetching ------------------------------------------------------------------------------------

def test_a_small_asset_over_the_cap_is_refused_before_any_request(tmp_path: Path) -> None:
    source = pick(tmp_path, None, True)  # the offline fetcher refuses every request: none is made
    cap = FetchConfig().small_asset_max_bytes
    with pytest.raises(SizeExceeded):
        source.read(Asset("x.sha256", "https://h.example/x.sha256", cap + 1))
    with pytest.raises(SizeExceeded):
        source.read(Asset("x.sha256", "https://h.example/x.sha256", 11), max_bytes=10)


def test_offline_fetch_answers_from_the_cache_by_digest(tmp_path: Path) -> None:
    source = source_for(settings_from({"SUPERFLUID_HOME": str(tmp_path / "home")}, mirror=None, offline=True),
                        fix=ONLINE)
    cache = Cache.for_home(str(tmp_path / "home"))
    sha, _ = cache.blobs.put_bytes(b"an engine")
    got = source.fetch(Asset("e.tar.gz", "https://h.example/e.tar.gz", 9), sha256=sha.upper())
    assert got.cached and got.sha256 == sha and got.path.read_bytes() == b"an engine"
    with pytest.raises(OfflineMissing) as e:
        source.fetch(Asset("f.tar.gz", "https://h.example/f.tar.gz", 9), sha256="0" * 64)
    assert e.value.fixes == (ONLINE,)
    with pytest.raises(OfflineMissing):
        source.fetch(Asset("f.tar.gz", "https://h.example/f.tar.gz", 9), sha256=None)  # no digest, no entry
    assert [d.sha256 for d in source.fetch_many([(Asset("e", "u", None), sha)])] == [sha]


def test_offline_read_of_what_the_cache_lacks_names_the_fix(tmp_path: Path) -> None:
    source = source_for(settings_from({"SUPERFLUID_HOME": str(tmp_path / "home")}, mirror=None, offline=True),
                        fix=ONLINE)
    with pytest.raises(OfflineMissing) as e:
        source.read(Asset("x.sha256", "https://h.example/x.sha256", 10))
    assert e.value.fixes == (ONLINE,)


def test_each_fetch_is_given_the_digest_it_expects(tmp_path: Path) -> None:
    """A source composed with ``by_digest`` (a registry's) is handed, for every fetch and read, the fetcher
    of exactly the URLs it fetches, each with the SHA-256 expected of it: no digest is learned beforehand."""
    data = b"an engine"
    sha = hashlib.sha256(data).hexdigest()
    (tmp_path / "e.tar.gz").write_bytes(data)
    url = (tmp_path / "e.tar.gz").as_uri()
    asked: list[dict[str, str | None]] = []

    def by_digest(digests: Mapping[str, str | None]) -> Fetcher:
        asked.append(dict(digests))
        return FileFetcher()

    cache = Cache.for_home(str(tmp_path / "home"))
    source = ListedSource(Mirror(tmp_path.as_uri() + "/", FileFetcher(), cache), cache, FileFetcher(),
                          mirror=tmp_path.as_uri() + "/", by_digest=by_digest)
    listed = Asset("e.tar.gz", url, len(data), f"sha256:{sha}")
    assert source.read(listed) == data
    assert source.fetch(Asset("e.tar.gz", url, len(data)), sha256=sha).path.read_bytes() == data
    assert [d.sha256 for d in source.fetch_many([(Asset("e.tar.gz", url, len(data)), sha)])] == [sha]
    assert asked == [{url: sha}] * 3
