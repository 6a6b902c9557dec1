"""``manifest/settings``: what the manifest's mains read of the environment, once: each variable as
set (stripped or split as its readers used to), empty when unset, the secret never shown."""

from __future__ import annotations

import os
from dataclasses import FrozenInstanceError

import pytest

from superfluid.manifest.settings import Settings, read_settings


def test_nothing_set_is_the_defaults() -> None:
    got = read_settings({"HOME": "/u"})
    assert got == Settings(installer=got.installer)
    assert (got.source, got.keys, got.ttl, got.max_age, got.tuf_repo, got.tuf_keys, got.expires) == \
        ("", (), "", "", None, None, ())
    assert (got.signing_key_file, got.signing_key, got.source_date_epoch, got.workflow_ref) == ("", "", "", "")
    assert dict(got.environment) == {"HOME": "/u"}
    sources = got.installer
    assert (sources.home, sources.mirror, sources.github_api, sources.github_token, sources.offline) == \
        ("/u/.superfluid", None, "", None, False)


@pytest.mark.parametrize(("environ", "home", "api", "token"), [
    pytest.param({"SUPERFLUID_HOME": "/h", "SUPERFLUID_GITHUB_API": "http://127.0.0.1:8/api", "GH_TOKEN": " gh ",
                  "GITHUB_TOKEN": "github"}, "/h", "http://127.0.0.1:8/api", "gh", id="gh-token-first"),
    pytest.param({"SUPERFLUID_HOME": "/h", "GH_TOKEN": "  ", "GITHUB_TOKEN": "github", "HTTP_PROXY": "http://p:3"},
                 "/h", "", "github", id="a-blank-gh-token-then-github-token"),
])
def test_what_the_installers_release_sources_are_given(environ: dict[str, str], home: str, api: str,
                                                       token: str) -> None:
    got = read_settings({**environ, "SUPERFLUID_MIRROR": "https://mirror.example/r/"}).installer
    assert (got.home, got.github_api, got.github_token) == (home, api, token)
    assert got.mirror is None  # SUPERFLUID_MIRROR is not read: a source names its own place


def test_each_variable_as_its_readers_take_it() -> None:
    environ = {
        "SUPERFLUID_MANIFEST_SOURCE": "  github:acme/superfluid \n",
        "SUPERFLUID_MANIFEST_KEYS": os.pathsep.join(["a.pub", "", "  ", " b.pub"]),
        "SUPERFLUID_MANIFEST_TTL": " 5 ",
        "SUPERFLUID_MANIFEST_MAX_AGE": "30\n",
        "SUPERFLUID_MANIFEST_TUF_REPO": " /srv/tuf ",
        "SUPERFLUID_MANIFEST_TUF_KEYS": "  ",
        "SUPERFLUID_MANIFEST_EXPIRES": "timestamp=2s,, snapshot=3h,",
        "SUPERFLUID_SIGNING_KEY_FILE": "/k/minisign.key",
        "SOURCE_DATE_EPOCH": "1700000000",
        "GITHUB_WORKFLOW_REF": " acme/superfluid/.github/workflows/release.yml@refs/tags/v1.0\n",
        "PATH": "/usr/bin",
    }
    got = read_settings(environ)
    assert got.source == "github:acme/superfluid"
    assert got.keys == ("a.pub", " b.pub")  # a named path is kept as written: only blank parts are left out
    assert (got.ttl, got.max_age) == ("5", "30")
    assert (got.tuf_repo, got.tuf_keys) == ("/srv/tuf", None)
    assert got.expires == ("timestamp=2s", " snapshot=3h")
    assert (got.signing_key_file, got.signing_key, got.source_date_epoch) == ("/k/minisign.key", "", "1700000000")
    assert got.workflow_ref == "acme/superfluid/.github/workflows/release.yml@refs/tags/v1.0"
    assert dict(got.environment) == environ


def test_the_environment_is_a_copy_read_once() -> None:
    environ = {"SUPERFLUID_HOME": "/h"}
    got = read_settings(environ)
    environ["SUPERFLUID_HOME"] = "/elsewhere"
    assert got.environment["SUPERFLUID_HOME"] == "/h"
    with pytest.raises(TypeError):
        got.environment["SUPERFLUID_HOME"] = "/x"  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        got.source = "/r"  # type: ignore[misc]


def test_secrets_are_never_shown() -> None:
    secret = "untrusted comment: minisign secret key\nRWRTY0IyAAAAsecret"
    got = read_settings({"SUPERFLUID_SIGNING_KEY": secret, "GH_TOKEN": "ghp_token"})
    assert got.signing_key == secret and got.environment["GH_TOKEN"] == "ghp_token"
    assert "RWRTY0IyAAAAsecret" not in repr(got) and "ghp_token" not in repr(got)


def test_records_are_made_by_keyword() -> None:
    with pytest.raises(TypeError):
        Settings(read_settings({}).installer, "github:acme/superfluid")  # type: ignore[misc]
