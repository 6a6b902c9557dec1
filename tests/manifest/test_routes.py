"""The manifest service's paths (``manifest/routes.py``): one grammar for the server, the static export
and ``superfluid compat --service``; every other request a 400/404 naming the parameter."""

from __future__ import annotations

import re

import pytest

from superfluid.manifest.routes import (
    Choose,
    Health,
    Page,
    ReleaseList,
    ReleaseOne,
    RouteError,
    choose_route,
    parse_route,
    version_usable,
)
from tests import cli

BASERT_2 = Choose("basert", "abi", "2")


@pytest.mark.parametrize(("path", "query", "route"), [
    pytest.param("/", "", Page(), id="root"),
    pytest.param("/index.html", "", Page(), id="page"),
    pytest.param("/health", "", Health(), id="health"),
    pytest.param("/v1/releases", "", ReleaseList(), id="releases"),
    pytest.param("/v1/releases.json", "", ReleaseList(), id="releases-json"),
    pytest.param("/v1/releases/", "", ReleaseList(), id="releases-slash"),
    pytest.param("/v1/releases/0.2.0", "", ReleaseOne("0.2.0"), id="release"),
    pytest.param("/v1/releases/0.2.0.json", "", ReleaseOne("0.2.0"), id="release-json"),
    pytest.param("/v1/releases/1.0rc1+local", "", ReleaseOne("1.0rc1+local"), id="release-pep440"),
    pytest.param("/v1/choose/basert/abi/2", "", BASERT_2, id="basert-abi"),
    pytest.param("/v1/choose/basert/abi/2.json", "", BASERT_2, id="basert-abi-json"),
    pytest.param("/v1/choose", "runtime=basert&abi=2", BASERT_2, id="query-form"),
    pytest.param("/v1/choose/basert/abi/2", "platform=linux-x64", Choose("basert", "abi", "2", "linux-x64"),
                 id="platform-query"),
    pytest.param("/v1/choose/basert/abi/2/linux-x64.json", "", Choose("basert", "abi", "2", "linux-x64"),
                 id="platform-path"),
    pytest.param("/v1/choose", "runtime=basert&abi=2&platform=macos-arm64",
                 Choose("basert", "abi", "2", "macos-arm64"), id="query-form-platform"),
    pytest.param("/v1/choose/basert/version/0.3.0", "", Choose("basert", "version", "0.3.0"), id="basert-unnumbered"),
    pytest.param("/v1/choose/llamacpp/build/b11549", "", Choose("llamacpp", "build", "b11549"), id="llamacpp"),
    pytest.param("/v1/choose", "runtime=llamacpp&build=b11549", Choose("llamacpp", "build", "b11549"),
                 id="llamacpp-query"),
    pytest.param("/v1/choose/mlx/version/0.32.2.json", "", Choose("mlx", "version", "0.32.2"), id="mlx"),
])
def test_answered_paths(path: str, query: str, route: object) -> None:
    assert parse_route(path, query) == route


@pytest.mark.parametrize(("path", "query", "status", "parameter"), [
    pytest.param("/v2/releases", "", 404, "path", id="unknown-version-prefix"),
    pytest.param("/etc/passwd", "", 404, "path", id="unknown-path"),
    pytest.param("/v1/releases/0.2.0/extra", "", 404, "path", id="too-deep"),
    pytest.param("/v1/releases/..", "", 400, "version", id="dot-dot"),
    pytest.param("/v1/releases/-1", "", 400, "version", id="bad-version"),
    pytest.param("/v1/releases", "page=2", 400, "page", id="unknown-query"),
    pytest.param("/v1/choose/foo/abi/2", "", 404, "runtime", id="unknown-runtime"),
    pytest.param("/v1/choose/llamacpp/abi/2", "", 404, "kind", id="kind-of-another-runtime"),
    pytest.param("/v1/choose/basert", "", 404, "path", id="no-kind"),
    pytest.param("/v1/choose/basert/abi/two", "", 400, "abi", id="abi-not-a-number"),
    pytest.param("/v1/choose/basert/abi/02", "", 400, "abi", id="abi-leading-zero"),
    pytest.param("/v1/choose/basert/abi/0", "", 400, "abi", id="abi-zero"),
    pytest.param("/v1/choose/basert/abi/-1", "", 400, "abi", id="abi-negative"),
    pytest.param("/v1/choose/llamacpp/build/11549", "", 400, "build", id="build-without-b"),
    pytest.param("/v1/choose/llamacpp/build/b11549x", "", 400, "build", id="build-garbage"),
    pytest.param("/v1/choose/mlx/version/..", "", 400, "version", id="version-dot-dot"),
    pytest.param("/v1/choose/basert/abi/2", "platform=windows-x64", 400, "platform", id="bad-platform"),
    pytest.param("/v1/choose/basert/abi/2/linux-x64", "platform=linux-x64", 400, "platform", id="platform-twice"),
    pytest.param("/v1/choose/basert/abi/2", "abi=3", 400, "abi", id="extra-query-on-path"),
    pytest.param("/v1/choose", "abi=2", 400, "runtime", id="query-without-runtime"),
    pytest.param("/v1/choose", "runtime=basert", 400, "abi", id="query-without-value"),
    pytest.param("/v1/choose", "runtime=basert&abi=2&version=0.3.0", 400, "abi", id="query-two-values"),
    pytest.param("/v1/choose", "runtime=mlx&build=b1", 400, "build", id="query-kind-of-another-runtime"),
    pytest.param("/v1/choose", "runtime=basert&abi=2&abi=3", 400, "abi", id="query-repeated"),
    pytest.param("/v1/choose", "runtime=nope&abi=2", 404, "runtime", id="query-unknown-runtime"),
])
def test_refused_naming_the_parameter(path: str, query: str, status: int, parameter: str) -> None:
    with pytest.raises(RouteError) as caught:
        parse_route(path, query)
    assert (caught.value.status, caught.value.parameter) == (status, parameter)
    assert caught.value.message


@pytest.mark.parametrize("route", [
    ReleaseList(), ReleaseOne("0.2.0"), ReleaseOne("1.0+local"), BASERT_2, Choose("basert", "abi", "2", "linux-x64"),
    Choose("basert", "version", "0.3.0"), Choose("llamacpp", "build", "b11642", "macos-arm64"),
    Choose("mlx", "version", "0.32.2"), Page(),
])
def test_each_route_parses_back_from_its_static_path(route: object) -> None:
    from urllib.parse import unquote

    assert parse_route(unquote(route.path)) == route  # type: ignore[attr-defined]


def test_the_command_line_asks_through_the_same_grammar() -> None:
    assert choose_route("basert", "abi", "2", "linux-x64").path == "/v1/choose/basert/abi/2/linux-x64.json"
    with pytest.raises(RouteError, match="llamacpp is asked by build, not by abi"):
        choose_route("llamacpp", "abi", "2")
    with pytest.raises(RouteError, match="malformed"):
        choose_route("mlx", "version", "../x")


@pytest.mark.parametrize(("version", "usable"), [
    ("0.1.0", True), ("1.0rc1", True), ("1.0+local.1", True), ("b11642", True),
    ("", False), ("../x", False), ("a/b", False), (".hidden", False), ("1.0.json", False), ("x" * 65, False),
    ("0.1.0 ", False), ("0.1.0\n", False),
])
def test_version_usable(version: str, usable: bool) -> None:
    assert version_usable(version) is usable


@pytest.mark.parametrize(("value", "says"), [
    ("99999999999999999999", "abi 99999999999999999999 is out of range: expected a positive whole number without "
                             "leading zeros, e.g. 2, of at most 9 digits"),
    ("02", "abi '02' is malformed"), ("x", "abi 'x' is malformed"),
])
def test_a_number_too_long_is_out_of_range_not_malformed(value: str, says: str) -> None:
    """``compat --abi 99999999999999999999`` (issue 42, item 33) says out of range, on the command line too."""
    with pytest.raises(RouteError, match=re.escape(says)):
        choose_route("basert", "abi", value)
    if value.isdigit() and len(value) > 9:
        done = cli.run("superfluid", "compat", "--service", "http://127.0.0.1:9/", "--runtime", "basert", "--abi",
                       value)
        assert done.code == 2 and says in done.stderr, done.stderr
