"""What ``runtime install`` says, through the real CLI against the loopback release server and a mirror
folder (issue 42): a second identical install that waited for the first sees it (item 5); the
fixes of an install that is already there, of ``--offline`` with an empty cache, and of a listing
that cannot be read while the installs came from a mirror, each pasted as a user would and checked
to do what it says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from superfluid.installer.mutex import mutex_owner
from tests import cli
from tests.conftest import Home
from tests.end_to_end import releases
from tests.release_server import ReleaseServer

BUNDLE = "basert-engine-linux-x64-0.4.0.tar.gz"


def test_a_second_identical_install_that_waited_sees_the_first(cli_home: Home, server: ReleaseServer) -> None:
    name = releases.bundle_name("0.4.0")
    server.fault(server.mirror_path(releases.REPO, "v0.4.0", name), "stall", after=1000, seconds=3.0)
    argv = ("runtime", "install", "basert", "--mirror", server.mirror_url)
    first = cli_home.popen(*argv)  # its download stalls 3 s, holding the runtime's lock
    deadline = time.monotonic() + 30
    while mutex_owner(cli_home.basert) is None:
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.02)
    second = cli_home.superfluid(*argv)  # waits for the lock, then finds the first's install
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert second.code == 0, second.stderr
    assert "another install of basert is running" in second.stderr
    assert "superfluid: basert 0.4.0-cpu is already installed from the same archive (sha256 " in second.stdout
    assert "nothing was fetched or changed" in second.stdout, second.stdout
    assert "replacing" not in second.stdout + second.stderr and "extract" not in second.stderr
    assert cli_home.installs() == ["0.4.0-cpu"] and cli_home.leftovers() == []
    fetched = [r for r in server.requests_to("/mirror/") if r.path.endswith(name)]
    assert len(fetched) == 2  # the first's stalled attempt and its resume: the second fetched nothing


def test_an_install_already_there_names_its_reinstall_and_its_check(cli_home: Home, server: ReleaseServer) -> None:
    argv = ("runtime", "install", "basert", "--version", "0.3.1", "--mirror", server.mirror_url)
    assert cli_home.superfluid(*argv).code == 0
    run = cli_home.superfluid(*argv)
    assert run.code == 0, run.stderr
    assert run.stdout.endswith(
        f"nothing was fetched or changed; `superfluid runtime install basert --version 0.3.1 --reinstall --mirror "
        f"{server.mirror_url}` installs it again; or `superfluid runtime verify basert 0.3.1-cpu` checks its files\n")
    before = cli_home.receipt("0.3.1-cpu")["installed_at"]
    time.sleep(1.1)  # installed_at is to the second
    again = cli.paste(run.fix("--reinstall"), run, env=cli_home.env)
    assert again.code == 0 and "replacing the one of that name" in again.stdout, again.stdout
    assert cli_home.receipt("0.3.1-cpu")["installed_at"] != before and cli_home.installs() == ["0.3.1-cpu"]
    checked = cli.paste(run.fix("verify"), run, env=cli_home.env)
    assert checked.code == 0 and "0.3.1-cpu" in checked.stdout


def test_offline_with_an_empty_cache_names_the_same_install_online(cli_home: Home, server: ReleaseServer) -> None:
    run = cli_home.superfluid("runtime", "install", "basert", "--version", "0.3.1", "--offline", "--mirror",
                              server.mirror_url, "--json")
    assert run.code == 1
    error = run.json()["error"]
    assert error["fix"] == f"superfluid runtime install basert --version 0.3.1 --mirror {server.mirror_url}"
    assert error["fixes"][0]["does"] == "fills the cache and installs it" and "`" not in error["fix"]
    done = cli.paste(run.fix("install"), run, env=cli_home.env)
    assert done.code == 0 and cli_home.installs() == ["0.3.1-cpu"], done.stderr
    offline = cli_home.superfluid("runtime", "install", "basert", "--version", "0.3.1", "--offline", "--mirror",
                                  server.mirror_url, "--reinstall")
    assert offline.code == 0, offline.stderr  # the cache is filled: the offline line runs now


@pytest.mark.parametrize("offline", [True, False], ids=["offline", "github-unreachable"])
def test_a_listing_that_cannot_be_read_names_the_mirror_the_installs_came_from(cli_home: Home, mirror: Path,
                                                                                offline: bool) -> None:
    cli_home.env["SUPERFLUID_GITHUB_API"] = "http://127.0.0.1:9"  # nothing listens: GitHub cannot be read
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror)).code == 0
    flags = ("--offline",) if offline else ()
    run = cli_home.superfluid("runtime", "install", "basert", "--version", "0.3.1", *flags)
    assert run.code == 1
    fix = run.fix("--mirror")
    assert fix.argv == ("superfluid", "runtime", "install", "basert", "--version", "0.3.1", "--mirror", str(mirror),
                        *flags)
    assert (f"`{' '.join(fix.argv)}` reads the mirror the installs of basert here came from") in run.stderr
    done = cli.paste(fix, run, env=cli_home.env)
    assert done.code == 0 and cli_home.installs() == ["0.3.1-cpu", "0.4.0-cpu"], done.stderr


def test_an_update_that_cannot_read_the_listing_names_the_mirror_the_installs_came_from(cli_home: Home,
                                                                                        mirror: Path) -> None:
    cli_home.env["SUPERFLUID_GITHUB_API"] = "http://127.0.0.1:9"  # nothing listens: GitHub cannot be read
    assert cli_home.superfluid("runtime", "install", "basert", "--version", "0.3.1", "--mirror", str(mirror)).code == 0
    run = cli_home.superfluid("runtime", "update", "basert")
    assert run.code == 1
    fix = run.fix("update")
    assert fix.argv == ("superfluid", "runtime", "update", "basert", "--mirror", str(mirror))
    done = cli.paste(fix, run, env=cli_home.env)
    assert done.code == 0 and cli_home.installs() == ["0.3.1-cpu", "0.4.0-cpu"], done.stderr
