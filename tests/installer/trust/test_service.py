"""``installer/trust/service``: where a manifest service is (its base URL; a directory holding a static
export as a ``file://`` URL) and the ``Trust`` a command starts from (the root it names, else
``SUPERFLUID_MANIFEST_ROOT``, none when it asks unchecked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.installer.settings import MANIFEST_ROOT_VARIABLE
from superfluid.installer.trust.manifest import Trust
from superfluid.installer.trust.service import ENV_URL, service_base, trust_for
from superfluid.runtime.kernel.errors import UsageError
from tests.settings_from import settings_from


@pytest.mark.parametrize(("url", "base"), [
    pytest.param("https://manifest.example", "https://manifest.example/", id="https"),
    pytest.param("https://manifest.example/v/", "https://manifest.example/v/", id="https-slash"),
    pytest.param("HTTP://127.0.0.1:8000", "HTTP://127.0.0.1:8000/", id="http-any-case"),
    pytest.param("file:///srv/site", "file:///srv/site/", id="file"),
])
def test_a_url_is_its_base_ending_in_a_slash(url: str, base: str) -> None:
    assert service_base(url) == base


def test_a_directory_is_a_file_url(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    assert service_base(str(site)) == site.resolve().as_uri() + "/"


@pytest.mark.parametrize(("url", "says"), [
    pytest.param("ftp://manifest.example/", "--service ftp://manifest.example/: give an http(s):// URL", id="scheme"),
    pytest.param("{tmp}/nowhere", "--service {tmp}/nowhere: no such directory", id="no-directory"),
    pytest.param("{tmp}/a-file", "no such directory", id="a-file"),
])
def test_anything_else_is_a_usage_error_naming_who_gave_it(tmp_path: Path, url: str, says: str) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError) as e:
        service_base(url.format(tmp=tmp_path))
    assert says.format(tmp=tmp_path) in e.value.message
    with pytest.raises(UsageError, match=f"^{ENV_URL} "):
        service_base(url.format(tmp=tmp_path), ENV_URL)


def test_the_trust_names_the_root_given_else_the_environments() -> None:
    environ = {"SUPERFLUID_HOME": "/h", MANIFEST_ROOT_VARIABLE: " /env/1.root.json "}
    assert trust_for("/flag/1.root.json", False, settings_from(environ)) == Trust("/h", "/flag/1.root.json", False)
    assert trust_for(None, False, settings_from(environ)) == Trust("/h", "/env/1.root.json", False)
    assert trust_for(None, False, settings_from({"SUPERFLUID_HOME": "/h"})) == Trust("/h", None, False)


def test_unchecked_trusts_no_root() -> None:
    environ = {"SUPERFLUID_HOME": "/h", MANIFEST_ROOT_VARIABLE: "/env/1.root.json"}
    assert trust_for(None, True, settings_from(environ)) == Trust("/h", None, True)
