"""What an install says with ``-q`` and ``-v`` (issue 42, item 27), through the real CLI against the
loopback release server: ``-q`` keeps the answer and drops the notes; ``-v`` adds each request the
installer makes; neither changes stdout's answer or the exit code."""

from __future__ import annotations

import pytest

from tests.conftest import Home
from tests.end_to_end import releases
from tests.release_server import ReleaseServer


def _install(home: Home, server: ReleaseServer, *flags: str):  # type: ignore[no-untyped-def]
    return home.superfluid("runtime", "install", "basert", "--version", "0.4.0", "--mirror", server.mirror_url,
                           *flags)


def test_plain_says_where_it_installs_from(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server)
    assert run.code == 0, run.stderr
    assert "superfluid: installing basert 0.4.0-cpu" in run.stderr
    assert "superfluid: GET " not in run.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_drops_the_notes_and_keeps_the_answer(cli_home: Home, server: ReleaseServer, where: str) -> None:
    run = (cli_home.superfluid("-q", "runtime", "install", "basert", "--version", "0.4.0", "--mirror",
                               server.mirror_url) if where == "before" else _install(cli_home, server, "-q"))
    assert run.code == 0, run.stderr
    assert "installing" not in run.stderr and "from http" not in run.stderr, run.stderr
    assert "basert 0.4.0-cpu installed" in run.stdout + run.stderr
    assert cli_home.installs() == ["0.4.0-cpu"]


def test_verbose_says_each_request(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server, "-v")
    assert run.code == 0, run.stderr
    assert "superfluid: installing basert 0.4.0-cpu" in run.stderr
    gets = [line for line in run.stderr.splitlines() if line.startswith("superfluid: GET http://127.0.0.1")]
    assert any(releases.bundle_name("0.4.0") in line for line in gets), run.stderr
