"""``installer/settings.Settings``: frozen and keyword-only, its defaults, the API base, and who named a mirror;
and the face's one builder of it (``superfluid/settings.settings_of``) read from an environment, table-driven."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.config import DEFAULT_GITHUB_API, FetchConfig
from superfluid.installer.settings import MIRROR_FLAG, MIRROR_VARIABLE, Settings
from superfluid.settings import settings_of


def test_the_defaults_are_github_online_with_no_bar() -> None:
    s = Settings(home="/h")
    assert (s.mirror, s.mirror_named_by, s.offline, s.progress, s.api) == (None, MIRROR_FLAG, False, "off",
                                                                             DEFAULT_GITHUB_API)
    assert s.fetch == FetchConfig() and s.auth_files == () and dict(s.host_environ) == {}


def test_it_is_frozen_and_keyword_only() -> None:
    s = Settings(home="/h")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.home = "/elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Settings("/h")  # type: ignore[misc]


def test_a_mirror_is_named_by_the_flag_or_the_variable_alone() -> None:
    with pytest.raises(ValueError, match="Settings.mirror_named_by must be --mirror or SUPERFLUID_MIRROR"):
        Settings(home="/h", mirror="/m", mirror_named_by="--from")


@pytest.mark.parametrize(("environ", "flags", "want"), [
    pytest.param({"SUPERFLUID_HOME": "/h"}, {}, {"home": "/h", "mirror": None, "github_api": "", "offline": False,
                                                 "github_token": None, "progress": "terminal",
                                                 "trust_root": None}, id="nothing-set"),
    pytest.param({"SUPERFLUID_MIRROR": "/m"}, {}, {"mirror": "/m", "mirror_named_by": MIRROR_VARIABLE,
                                                   "mirror_variable": "/m"}, id="the-variable-names-the-mirror"),
    pytest.param({"SUPERFLUID_MIRROR": "/m"}, {"mirror": "/f"}, {"mirror": "/f", "mirror_named_by": MIRROR_FLAG,
                                                                 "mirror_variable": "/m"}, id="the-flag-first"),
    pytest.param({"SUPERFLUID_MIRROR": ""}, {}, {"mirror": None}, id="an-empty-variable-is-unset"),
    pytest.param({"GH_TOKEN": " ", "GITHUB_TOKEN": " t2 "}, {}, {"github_token": "t2"}, id="a-blank-token-is-unset"),
    pytest.param({"GH_TOKEN": "t1", "GITHUB_TOKEN": "t2"}, {}, {"github_token": "t1"}, id="gh-token-first"),
    pytest.param({"SUPERFLUID_GITHUB_API": "http://127.0.0.1:9"}, {}, {"github_api": "http://127.0.0.1:9"},
                 id="the-api"),
    pytest.param({"CI": "1"}, {}, {"progress": "off"}, id="ci-has-no-bar"),
    pytest.param({}, {"json_mode": True}, {"progress": "off"}, id="json-has-no-bar"),
    pytest.param({}, {"offline": True}, {"offline": True}, id="offline"),
    pytest.param({"SUPERFLUID_MANIFEST_ROOT": " /r.json "}, {}, {"trust_root": "/r.json"}, id="the-trust-root"),
    pytest.param({"REGISTRY_AUTH_FILE": "/a.json", "DOCKER_CONFIG": "/d"}, {},
                 {"auth_files": ("/a.json",), "auth_file_named": True}, id="the-named-auth-file-alone"),
    pytest.param({"DOCKER_CONFIG": "/d", "HOME": "/u"}, {}, {"auth_files": ("/d/config.json",),
                                                             "auth_file_named": False}, id="docker-config"),
    pytest.param({"HOME": "/u"}, {}, {"auth_files": ("/u/.docker/config.json",)}, id="the-home-folder's"),
])
def test_settings_of_reads_the_environment_and_the_flags(environ: dict[str, str], flags: dict[str, Any],
                                                           want: dict[str, Any]) -> None:
    s = settings_of({"SUPERFLUID_HOME": "/h", **environ}, **flags)
    assert {k: getattr(s, k) for k in want} == want


@pytest.mark.parametrize(("variable", "flag", "plain"), [
    ("", False, False), ("1", False, True), ("yes", False, True), ("no", False, False), ("", True, True),
])
def test_plain_http_is_the_flag_or_the_variable(variable: str, flag: bool, plain: bool) -> None:
    s = settings_of({"SUPERFLUID_HOME": "/h", "SUPERFLUID_OCI_PLAIN_HTTP": variable}, plain_http=flag)
    assert s.fetch.oci_plain_http is plain


def test_the_environment_is_kept_read_only_for_the_host_facts(tmp_path: Path) -> None:
    environ = {"SUPERFLUID_HOME": str(tmp_path), "SUPERFLUID_HOST_PLATFORM": "linux-x86_64"}
    s = settings_of(environ)
    environ["LATER"] = "1"
    assert dict(s.host_environ) == {"SUPERFLUID_HOME": str(tmp_path), "SUPERFLUID_HOST_PLATFORM": "linux-x86_64"}
    with pytest.raises(TypeError):
        s.host_environ["X"] = "1"  # type: ignore[index]
