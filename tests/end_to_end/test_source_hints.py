"""Hints that keep the user's source (issue 25, item 5): a command a message suggests carries the
``--mirror``/``--offline`` the command line gave; ``install --offline`` with no mirror names the mirror
the installs came from; ``runtime repair`` reinstalls from the mirror the receipts record before
GitHub. Through the real CLI against a mirror directory and the loopback server."""

from __future__ import annotations

import json

import pytest

from superfluid.runtime.kernel.fixes import Fix, render
from superfluid.source_hints import takes, with_flags
from tests.conftest import native_cache
from tests.end_to_end import releases
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

M = [("--mirror", "/srv/m")]
OFF = [("--offline", None)]

#: (a fix's command and what it does, the flags the line gave, the fix as printed)
HINTS = [
    pytest.param(("runtime", "install", "basert"), "fills the cache", M + OFF,
                 "`superfluid runtime install basert --mirror /srv/m` fills the cache", id="fill-the-cache"),
    pytest.param(("runtime", "install", "basert", "--version", "0.5.0", "--untested"), "installs it", M + OFF,
                 "`superfluid runtime install basert --version 0.5.0 --untested --mirror /srv/m --offline` installs it",
                 id="not-installable"),
    pytest.param(("runtime", "repair", "basert", "0.4.0-cpu"), "puts it back", M,
                 "`superfluid runtime repair basert 0.4.0-cpu --mirror /srv/m` puts it back", id="repair"),
    pytest.param(("runtime", "install", "basert", "--mirror", "/other"), "x", M,
                 "`superfluid runtime install basert --mirror /other` x", id="a-mirror-named-stays"),
    pytest.param(("runtime", "remove", "basert", "0.3.1-cpu"), "removes it", M + OFF,
                 "`superfluid runtime remove basert 0.3.1-cpu` removes it", id="remove-takes-no-source"),
    pytest.param(("runtime", "install", "basert", "--from", "a.tar.gz"), "x", M,
                 "`superfluid runtime install basert --from a.tar.gz` x", id="from-reads-no-listing"),
    pytest.param(("runtime", "install", "llamacpp"), "installs it", OFF,
                 "`superfluid runtime install llamacpp --offline` installs it", id="serve-offline"),
    pytest.param(("runtime", "install", "basert"), "x", [("--mirror", "/my mirror")],
                 "`superfluid runtime install basert --mirror '/my mirror'` x", id="quoted"),
    pytest.param(("runtime", "install", "basert"), "x", [], "`superfluid runtime install basert` x", id="none-given"),
    pytest.param(("runtime", "use", "basert", "--auto"), "x", M, "`superfluid runtime use basert --auto` x",
                 id="use-takes-no-source"),
    pytest.param(("lock",), "x", OFF, "`superfluid lock --offline` x", id="lock-offline"),
    pytest.param(("mirror", "push", "oci://h/r"), "x", M + [("--plain-http", None)],
                 "`superfluid mirror push oci://h/r --plain-http` x", id="push-takes-plain-http-alone"),
]


def test_what_a_command_takes_is_the_command_trees() -> None:
    assert takes(("superfluid", "runtime", "install", "basert")) == ("--mirror", "--offline", "--plain-http")
    assert takes(("superfluid", "runtime", "versions", "basert")) == ("--mirror", "--offline")
    assert takes(("superfluid", "serve", "--model", "m")) == ("--offline",)
    assert takes(("superfluid", "runtime", "list", "basert")) == () == takes(("superfluid-manifest", "export"))


@pytest.mark.parametrize(("argv", "does", "flags", "shown"), HINTS)
def test_a_fix_keeps_the_source_the_line_gave(argv: tuple[str, ...], does: str, flags: list[tuple[str, str | None]],
                                              shown: str) -> None:
    assert render([with_flags(Fix.superfluid(*argv, does=does), flags)]) == shown


@pytest.fixture
def from_dir(cli_home: Home, engines: object) -> tuple[Home, str]:
    """basert 0.3.1-cpu and 0.4.0-cpu installed from a mirror directory; GitHub unreachable."""
    root = str(releases.make_mirror(cli_home.path.parent / "mirror"))
    cli_home.env["SUPERFLUID_GITHUB_API"] = "http://127.0.0.1:9"  # nothing listens: GitHub is never asked
    for version in ("0.3.1", "0.4.0"):
        run = cli_home.superfluid("runtime", "install", "basert", "--mirror", root, "--version", version)
        assert run.code == 0, run.stderr
    return cli_home, root


def test_install_offline_after_a_mirror_install_names_that_mirror_and_it_works(from_dir: tuple[Home, str]) -> None:
    home, root = from_dir
    run = home.superfluid("runtime", "install", "basert", "--offline", "--version", "0.3.1")
    assert run.code == 1
    hint = f"`superfluid runtime install basert --version 0.3.1 --mirror {root} --offline`"
    assert f"{hint} reads the mirror the installs of basert here came from" in run.stderr
    run = home.superfluid("runtime", "install", "basert", "--offline", "--mirror", root, "--version", "0.3.1")
    assert run.code == 0, run.stderr  # the hint, run, installs


def test_install_online_with_github_unreachable_names_the_mirror(from_dir: tuple[Home, str]) -> None:
    home, root = from_dir
    run = home.superfluid("runtime", "install", "basert", "--version", "0.3.1")
    assert run.code == 1
    assert (f"`superfluid runtime install basert --version 0.3.1 --mirror {root}` reads the mirror the installs of "
            "basert here came from") in run.stderr


def test_an_offline_mirror_hint_keeps_the_mirror(cli_home: Home) -> None:
    dead = "http://127.0.0.1:9/m"
    run = cli_home.superfluid("runtime", "install", "basert", "--offline", "--mirror", dead, "--json")
    assert run.code == 1
    error = run.json()["error"]
    assert error["fix"] == f"superfluid runtime install basert --mirror {dead}"  # online: it fills the cache
    assert error["fixes"][0]["does"] == "fills the cache and installs it" and error["fix"] in run.stderr


def test_versions_hint_keeps_the_mirror(from_dir: tuple[Home, str]) -> None:
    home, root = from_dir
    run = home.superfluid("runtime", "versions", "basert", "--mirror", root)
    assert run.code == 0 and f"`superfluid runtime install basert --mirror {root}` installs 0.4.0" in run.stdout


def test_serve_offline_hint_keeps_offline(cli_home: Home) -> None:
    model = native_cache() / "basert" / "models" / "tiny.base"
    run = cli_home.superfluid("serve", "--offline", "--model", str(model), "--runtime", "llamacpp")
    assert run.code == 4 and "`superfluid runtime install llamacpp --offline`" in run.stderr


@pytest.mark.parametrize("receipt", ["does-not-read", "records-no-files"])
def test_repair_reinstalls_from_the_mirror_the_receipts_record(from_dir: tuple[Home, str], receipt: str) -> None:
    home, root = from_dir
    path = home.basert / "0.3.1-cpu" / "runtime.json"
    if receipt == "does-not-read":
        path.write_text("{")  # then the mirror the runtime's other installs record
    else:
        doc = json.loads(path.read_text())
        del doc["files"]
        path.write_text(json.dumps(doc))
    run = home.superfluid("runtime", "repair", "basert", "0.3.1-cpu")
    assert run.code == 0, run.stderr  # GitHub is unreachable: only the mirror could serve it
    assert f"reinstalling basert 0.3.1-cpu from the mirror {root}" in run.stderr
    assert home.receipt("0.3.1-cpu")["sources"][0]["url"].startswith("file://")
    assert "files" in home.receipt("0.3.1-cpu")


def test_repair_from_an_http_mirror_asks_no_github(cli_home: Home, server: ReleaseServer) -> None:
    cli_home.env["SUPERFLUID_GITHUB_API"] = server.url  # "GitHub" is the same server: its API path is watched
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    path = cli_home.basert / "0.4.0-cpu" / "runtime.json"
    doc = json.loads(path.read_text())
    del doc["files"]
    path.write_text(json.dumps(doc))
    server.clear_log()
    run = cli_home.superfluid("runtime", "repair", "basert")
    assert run.code == 0, run.stderr
    assert server.requests_to("/repos/") == [] and server.requests_to("/mirror/") != []


def test_repair_of_a_github_install_names_no_mirror(cli_home: Home, server: ReleaseServer) -> None:
    cli_home.env["SUPERFLUID_GITHUB_API"] = server.url
    assert cli_home.superfluid("runtime", "install", "basert").code == 0
    (cli_home.basert / "0.4.0-cpu" / "runtime.json").write_text("{")
    server.clear_log()
    run = cli_home.superfluid("runtime", "repair", "basert")
    assert run.code == 0, run.stderr
    assert "from the mirror" not in run.stderr and server.requests_to("/repos/") != []
