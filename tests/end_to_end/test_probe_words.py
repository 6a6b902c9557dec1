"""What an install says when a staged build's probe refuses it, through the real ``superfluid`` (issue
42, item 9): what failed, in the refusal's own words; never the staging folder (gone when the install
ends), a ``--basert-lib`` the user never gave, or the command that just failed as the fix; an archive
named with ``--from`` of another ABI gets the command that installs it untested, which a paste proves."""

from __future__ import annotations

from pathlib import Path

from tests import cli
from tests.conftest import Home
from tests.end_to_end import releases
from tests.release_server import ReleaseServer


def _said_only_what_failed(run: cli.Run) -> str:
    last = run.stderr.strip().splitlines()[-1]
    assert ".staging" not in last and "--basert-lib" not in last and "BASERT_LIB" not in last, last
    assert "libbaseRT states ABI 2; this superfluid drives ABI 1" in last, last
    return last


def test_an_archive_of_another_abi_names_its_untested_install(cli_home: Home, tmp_path: Path, engines: Path) -> None:
    archive = tmp_path / releases.bundle_name("0.5.0")
    archive.write_bytes(releases.bundle("0.5.0"))
    run = cli_home.superfluid("runtime", "install", "basert", "--from", str(archive))
    assert run.code == 1, run.stderr
    _said_only_what_failed(run)
    fix = run.fix("--untested")
    assert fix.argv == ("superfluid", "runtime", "install", "basert", "--from", str(archive), "--untested")
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0, pasted.stderr
    installed = cli_home.superfluid("runtime", "list", "basert", "--json")
    assert any(i["install"] == "0.5.0-cpu" for i in installed.json()["installs"]), installed.stdout


def test_a_release_whose_library_states_another_abi_names_no_command(cli_home: Home, release_server: ReleaseServer,
                                                                     engines: Path) -> None:
    """Its release states ABI 1 and its bundle holds an ABI 2 library: not the release it says, and
    ``--untested`` would refuse it too: no command, and not the install that just failed."""
    release_server.add_release(releases.REPO, "v0.4.0", releases.release_assets("0.4.0", 1, variant="0.5.0"),
                               sha256_files=True)
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", release_server.mirror_url)
    assert run.code == 1, run.stderr
    last = _said_only_what_failed(run)
    assert "the bundle is not the release it says" in last and "`superfluid" not in last
    assert run.fixes == ()
