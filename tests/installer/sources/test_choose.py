"""``installer/sources/choose``: which release source a command reads. ``--mirror``, else
``SUPERFLUID_MIRROR`` (empty is unset): an http(s) URL, a directory (read in place, even offline) or
an OCI registry; else GitHub at ``SUPERFLUID_GITHUB_API``; with ``--offline`` the cache alone. A bad
name is a usage error naming who gave it, with its fix, and never shows a password. Choosing opens no
connection. (Reading through each source: ``test_mirror.py``, ``test_github.py``, ``oci/test_source.py``.)"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from superfluid.installer.config import DEFAULT_GITHUB_API
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.github import GitHubClient
from superfluid.installer.sources.mirror import Mirror
from superfluid.installer.sources.release_source import ListedSource, OfflineSource, ReleaseSource
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.fixes import Fix
from tests.settings_from import settings_from

#: the fix a command hands its source: what fills the cache when --offline lacks something
FILL = Fix.superfluid("runtime", "install", "basert", does="fills the cache")


def _choose(home: Path, mirror: str | None, offline: bool = False, **variables: str) -> ReleaseSource:
    return source_for(settings_from({"SUPERFLUID_HOME": str(home), **variables}, mirror=mirror, offline=offline),
                      fix=FILL)


@pytest.mark.parametrize(("mirror", "variables", "offline", "kind", "lister", "root"), [
    pytest.param(None, {}, False, ListedSource, GitHubClient, DEFAULT_GITHUB_API, id="github"),
    pytest.param(None, {"SUPERFLUID_MIRROR": ""}, False, ListedSource, GitHubClient, DEFAULT_GITHUB_API,
                 id="an-empty-variable-is-unset"),
    pytest.param(None, {"SUPERFLUID_GITHUB_API": "http://127.0.0.1:9/api/v3/"}, False, ListedSource, GitHubClient,
                 "http://127.0.0.1:9/api/v3", id="github-elsewhere"),
    pytest.param("https://m.test/base", {}, False, ListedSource, Mirror, "https://m.test/base/", id="mirror-url"),
    pytest.param(None, {"SUPERFLUID_MIRROR": "https://m.test/env"}, False, ListedSource, Mirror,
                 "https://m.test/env/", id="mirror-from-the-environment"),
    pytest.param("https://m.test/flag", {"SUPERFLUID_MIRROR": "https://m.test/env"}, False, ListedSource, Mirror,
                 "https://m.test/flag/", id="the-flag-before-the-variable"),
    pytest.param("", {"SUPERFLUID_MIRROR": "https://m.test/env"}, False, ListedSource, Mirror,
                 "https://m.test/env/", id="an-empty-flag-is-not-given"),
    pytest.param("{dir}", {}, False, ListedSource, Mirror, "{uri}/", id="mirror-directory"),
    pytest.param("{dir}", {}, True, ListedSource, Mirror, "{uri}/", id="mirror-directory-offline-is-read-in-place"),
    pytest.param("https://m.test/base", {}, True, OfflineSource, Mirror, "https://m.test/base/",
                 id="mirror-url-offline"),
    pytest.param(None, {}, True, OfflineSource, GitHubClient, DEFAULT_GITHUB_API, id="github-offline"),
])
def test_the_source_chosen(tmp_path: Path, mirror: str | None, variables: dict[str, str], offline: bool,
                           kind: type[ReleaseSource], lister: type[object], root: str) -> None:
    folder = tmp_path / "mirror"
    folder.mkdir()
    fill = {"dir": str(folder), "uri": folder.resolve().as_uri()}
    source = _choose(tmp_path / "home", None if mirror is None else mirror.format(**fill), offline,
                     **{k: v.format(**fill) for k, v in variables.items()})
    assert isinstance(source, (ListedSource, OfflineSource)) and type(source) is kind
    listed = source.lister
    assert type(listed) is lister
    if isinstance(listed, GitHubClient):
        assert listed.api_base == root.rstrip("/") and source.mirror is None
    else:
        assert isinstance(listed, Mirror) and listed.root == root.format(**fill) == source.mirror
    assert listed.offline is (offline and kind is OfflineSource)
    if isinstance(source, OfflineSource):
        assert source.fix == FILL


def test_a_password_in_the_mirror_url_is_a_credential_never_the_root(tmp_path: Path) -> None:
    source = _choose(tmp_path, "https://me:s3cret@m.test/base")
    assert isinstance(source, ListedSource) and isinstance(source.lister, Mirror)
    assert source.lister.root == "https://m.test/base/" == source.mirror
    credential = source.fetcher.credential
    assert credential is not None and credential.origin == "https://m.test"
    assert credential.authorization == "Basic " + base64.b64encode(b"me:s3cret").decode()


@pytest.mark.parametrize(("mirror", "variables", "message", "fix"), [
    pytest.param("ftp://m.test/x", {}, "--mirror ftp://m.test/x: not a mirror (a mirror is a directory, or a URL "
                 "of http://, https://, file:// or oci://)",
                 "give --mirror an existing directory or a URL of http://, https://, file:// or oci://",
                 id="another-scheme"),
    pytest.param("{missing}", {}, "--mirror {missing}: no such directory",
                 "give --mirror an existing directory or a URL of http://, https://, file:// or oci://",
                 id="no-such-directory"),
    pytest.param(None, {"SUPERFLUID_MIRROR": "{missing}"}, "SUPERFLUID_MIRROR={missing}: no such directory",
                 "set SUPERFLUID_MIRROR to an existing directory or a URL of http://, https://, file:// or oci://, "
                 "or unset it", id="the-variable-named-as-such"),
    pytest.param(None, {"SUPERFLUID_GITHUB_API": "ftp://api.test/"}, "SUPERFLUID_GITHUB_API=ftp://api.test/: not an "
                 "http(s) URL", "set it to the API base", id="github-api-not-http"),
    pytest.param("oci://", {}, "", "name a registry repository: oci://HOST[:PORT]/REPO", id="oci-without-a-repository"),
])
def test_a_bad_source_is_a_usage_error_naming_who_gave_it(tmp_path: Path, mirror: str | None,
                                                          variables: dict[str, str], message: str, fix: str) -> None:
    fill = {"missing": str(tmp_path / "missing")}
    with pytest.raises(UsageError) as refused:
        _choose(tmp_path, None if mirror is None else mirror.format(**fill),
                **{k: v.format(**fill) for k, v in variables.items()})
    assert message.format(**fill) in str(refused.value)
    assert fix in (refused.value.advice or "") and refused.value.fixes == ()


def test_a_bad_mirror_never_shows_its_password(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        _choose(tmp_path, "ftp://me:s3cret@m.test/x")
    assert "s3cret" not in str(refused.value) and "m.test" in str(refused.value)
