"""``installer/oci_auth``: where a registry login is read (docker's and podman's files, first found
wins), how an ``auths`` entry is matched and decoded, a ``WWW-Authenticate`` challenge parsed and a
token asked for and read. No secret is ever repeated in a message."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.sources.oci.auth import Login, auth_files, login_for, parse_challenge, parse_token, token_url
from superfluid.runtime.kernel.errors import BadFile
from tests.settings_from import settings_from


def _auths(path: Path, entries: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": entries}))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(("entries", "user"), [
    pytest.param({"reg.example:5000": {"auth": _b64("u:p:w")}}, "u", id="auth-base64"),
    pytest.param({"https://reg.example:5000/v1/": {"auth": _b64("u:p:w")}}, "u", id="legacy-url-key"),
    pytest.param({"reg.example:5000": {"username": "u", "password": "p:w"}}, "u", id="username-password"),
    pytest.param({"reg.example:5000": {"auth": _b64("wide:x")}, "reg.example:5000/fleet": {"auth": _b64("u:p:w")}},
                 "u", id="namespace-wins"),
    pytest.param({"reg.example:5000/other": {"auth": _b64("u:p:w")}}, None, id="another-namespace"),
    pytest.param({"reg.example": {"auth": _b64("u:p:w")}}, None, id="another-port"),
])
def test_a_login_from_a_docker_config(tmp_path: Path, entries: dict[str, Any], user: str | None) -> None:
    _auths(tmp_path / ".docker" / "config.json", entries)
    got = login_for("reg.example:5000", "fleet/engines", settings_from({"HOME": str(tmp_path)}).auth_files)
    assert (got.user if got else None) == user
    if got is not None:
        assert got.secret == "p:w" and "p:w" not in repr(got)


def test_registry_auth_file_comes_first(tmp_path: Path) -> None:
    _auths(tmp_path / ".docker" / "config.json", {"reg.example": {"auth": _b64("docker:x")}})
    named = _auths(tmp_path / "auth.json", {"reg.example": {"auth": _b64("named:x")}})
    env = {"HOME": str(tmp_path), "REGISTRY_AUTH_FILE": str(named)}
    login = login_for("reg.example", "x", settings_from(env).auth_files)
    assert login is not None and login.user == "named" and login.source == str(named)
    config = _auths(tmp_path / "cfg" / "config.json", {"reg.example": {"auth": _b64("cfg:x")}})
    login = login_for("reg.example", "x", settings_from({"HOME": str(tmp_path),
                                                         "DOCKER_CONFIG": str(config.parent)}).auth_files)
    assert login is not None and login.user == "cfg"


@pytest.mark.parametrize(("text", "fault"), [
    pytest.param("{not json", "not a JSON auth file", id="not-json"),
    pytest.param('{"auths": []}', "no auths object", id="auths-not-object"),
    pytest.param(json.dumps({"auths": {"reg.example": {"auth": "!!s3cret!!"}}}), "not base64", id="bad-base64"),
])
def test_a_broken_auth_file_is_named_and_no_secret_repeated(tmp_path: Path, text: str, fault: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(text)
    with pytest.raises(BadFile, match=fault) as e:
        login_for("reg.example", "x", settings_from({"REGISTRY_AUTH_FILE": str(path)}).auth_files)
    assert str(path) in str(e.value) and "s3cret" not in str(e.value)


@pytest.mark.parametrize(("header", "scheme", "params"), [
    ('Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"', "bearer",
     {"realm": "https://auth.example/token", "service": "registry.example", "scope": "repository:a/b:pull"}),
    ('Basic realm="fleet-registry"', "basic", {"realm": "fleet-registry"}),
    ('bearer realm=https://auth.example/t, service=reg', "bearer",
     {"realm": "https://auth.example/t", "service": "reg"}),
    ('Bearer realm="a\\"b"', "bearer", {"realm": 'a"b'}),
])
def test_a_challenge(header: str, scheme: str, params: dict[str, str]) -> None:
    got = parse_challenge(header)
    assert got is not None and (got.scheme, dict(got.params)) == (scheme, params)


def test_no_challenge() -> None:
    assert parse_challenge(None) is None and parse_challenge("  ") is None


def test_a_token_is_asked_for_our_scope_too() -> None:
    c = parse_challenge('Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull"')
    assert c is not None
    assert token_url(c, "repository:a:pull,push") == (
        "https://auth.example/token?service=reg&scope=repository%3Aa%3Apull&scope=repository%3Aa%3Apull%2Cpush")
    assert token_url(c, "repository:a:pull").count("scope=") == 1


@pytest.mark.parametrize(("environ", "want"), [
    pytest.param({"REGISTRY_AUTH_FILE": "/a/auth.json", "DOCKER_CONFIG": "/d", "HOME": "/h"}, ["/a/auth.json"],
                 id="registry-auth-file-first"),
    pytest.param({"REGISTRY_AUTH_FILE": "", "DOCKER_CONFIG": "/d", "HOME": "/h"}, ["/d/config.json"],
                 id="empty-variable-is-unset"),
    pytest.param({"DOCKER_CONFIG": "/d", "HOME": "/h"}, ["/d/config.json"], id="docker-config-dir"),
    pytest.param({"HOME": "/h"}, ["/h/.docker/config.json"], id="home"),
])
def test_auth_files_in_order(environ: dict[str, str], want: list[str]) -> None:
    assert list(settings_from(environ).auth_files) == want


def test_auth_files_expand_a_tilde() -> None:
    (path,) = auth_files(named="~/auth.json", docker_config="", user_home="")
    assert "~" not in str(path) and path.name == "auth.json"


@pytest.mark.parametrize(("entries", "login"), [
    pytest.param({"reg.example": {"username": "u"}}, None, id="username-without-password"),
    pytest.param({"reg.example": {"username": "", "password": "p"}}, None, id="empty-username"),
    pytest.param({"reg.example": {"auth": "", "username": "u", "password": "p"}}, ("u", "p"),
                 id="empty-auth-falls-to-username"),
    pytest.param({"reg.example": {}}, None, id="empty-entry"),
    pytest.param({}, None, id="no-entries"),
    pytest.param({"REG.Example": {"auth": _b64("u:p")}}, ("u", "p"), id="host-case-insensitive"),
    pytest.param({"https://reg.example/v2/": {"auth": _b64("u:p")}}, ("u", "p"), id="v2-url-key"),
    pytest.param({"reg.example": {"auth": _b64("u:")}}, ("u", ""), id="empty-secret"),
    pytest.param({"reg.example/xy": {"auth": _b64("u:p")}}, None, id="namespace-prefix-is-not-a-word-prefix"),
])
def test_an_entry(tmp_path: Path, entries: dict[str, Any], login: tuple[str, str] | None) -> None:
    path = _auths(tmp_path / "auth.json", entries)
    got = login_for("reg.example", "xyz/engines", settings_from({"REGISTRY_AUTH_FILE": str(path)}).auth_files)
    assert ((got.user, got.secret) if got else None) == login
    if got is not None:
        assert got.source == str(path)


def test_only_a_credential_helper_is_no_login(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"credsStore": "desktop", "credHelpers": {"reg.example": "ecr-login"}}))
    assert login_for("reg.example", "x", settings_from({"REGISTRY_AUTH_FILE": str(path)}).auth_files) is None


def test_no_file_is_no_login(tmp_path: Path) -> None:
    assert login_for("reg.example", "x", settings_from({"HOME": str(tmp_path)}).auth_files) is None


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: p.mkdir(), id="a-directory"),
    pytest.param(os.mkfifo, id="a-fifo-never-blocks"),
])
def test_an_unreadable_auth_file_is_named(tmp_path: Path, make: Any) -> None:
    path = tmp_path / "auth.json"
    make(path)
    with pytest.raises(BadFile) as e:
        login_for("reg.example", "x", settings_from({"REGISTRY_AUTH_FILE": str(path)}).auth_files)
    assert e.value.path == str(path)


def test_an_entry_that_is_not_an_object(tmp_path: Path) -> None:
    path = _auths(tmp_path / "auth.json", {"reg.example": "u:p"})
    with pytest.raises(BadFile) as e:
        login_for("reg.example", "x", settings_from({"REGISTRY_AUTH_FILE": str(path)}).auth_files)
    assert e.value.json_path == "$.auths['reg.example']"


def test_basic_is_the_login_base64() -> None:
    login = Login("u", "p:w", "test")
    scheme, value = login.basic().split(" ")
    assert scheme == "Basic" and base64.b64decode(value) == b"u:p:w"
    assert "p:w" not in repr(login)


@pytest.mark.parametrize(("header", "scheme", "params"), [
    pytest.param("Bearer", "bearer", {}, id="scheme-alone"),
    pytest.param('Bearer realm="r", Basic realm="s"', "bearer", {"realm": "r"}, id="second-challenge-ignored"),
    pytest.param('Bearer REALM="r"', "bearer", {"realm": "r"}, id="parameter-names-lower-cased"),
    pytest.param('Bearer realm=""', "bearer", {"realm": ""}, id="empty-quoted"),
])
def test_challenge_edges(header: str, scheme: str, params: dict[str, str]) -> None:
    got = parse_challenge(header)
    assert got is not None and (got.scheme, dict(got.params)) == (scheme, params)


@pytest.mark.parametrize(("header", "url"), [
    pytest.param('Bearer realm="https://a.example/t?x=1"', "https://a.example/t?x=1&scope=repository%3Aa%3Apull",
                 id="realm-with-a-query"),
    pytest.param('Bearer realm="https://a.example/t",scope="repository:a:pull repository:b:pull"',
                 "https://a.example/t?scope=repository%3Aa%3Apull&scope=repository%3Ab%3Apull", id="two-scopes"),
    pytest.param('Bearer realm="https://a.example/t",service=""', "https://a.example/t?scope=repository%3Aa%3Apull",
                 id="empty-service-not-sent"),
])
def test_token_url(header: str, url: str) -> None:
    c = parse_challenge(header)
    assert c is not None and token_url(c, "repository:a:pull") == url


def test_a_challenge_without_a_realm_asks_no_token() -> None:
    c = parse_challenge('Bearer service="reg"')
    assert c is not None
    with pytest.raises(ValueError, match="realm"):
        token_url(c, "repository:a:pull")


@pytest.mark.parametrize(("body", "token"), [
    pytest.param(b'{"token": "t1"}', "t1", id="token"),
    pytest.param(b'{"access_token": "t2"}', "t2", id="oauth2-access-token"),
    pytest.param(b'{"token": "", "access_token": "t3"}', "t3", id="empty-token-then-access-token"),
    pytest.param(b'{"token": "t4", "access_token": "other"}', "t4", id="token-first"),
])
def test_a_token_answer(body: bytes, token: str) -> None:
    assert parse_token(body, "https://auth.example/t") == token


@pytest.mark.parametrize(("body", "json_path"), [
    pytest.param(b"not json", None, id="not-json"),
    pytest.param(b"[]", "$.token", id="not-an-object"),
    pytest.param(b"{}", "$.token", id="no-token"),
    pytest.param(b'{"token": 5}', "$.token", id="not-a-string"),
    pytest.param(b'{"token": "a\\r\\nX-Evil: 1"}', "$.token", id="header-injection"),
    pytest.param(b'{"token": "\\u00e9\\n"}', "$.token", id="newline"),
])
def test_a_token_answer_refused(body: bytes, json_path: str | None) -> None:
    with pytest.raises(BadFile) as e:
        parse_token(body, "https://auth.example/t")
    assert e.value.path == "https://auth.example/t" and e.value.json_path == json_path
