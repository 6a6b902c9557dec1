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


def test_a_library_of_another_abi_checked_names_the_install_of_one_it_drives(cli_home: Home, engines: Path,
                                                                             server: ReleaseServer) -> None:
    """``runtime check basert --basert-lib`` of an ABI 2 library: its report carries the install as a
    value, which the face renders and a paste proves (from the loopback API's releases)."""
    cli_home.env["SUPERFLUID_GITHUB_API"] = server.url
    lib = engines / "0.5.0" / "libbaseRT.so"
    run = cli_home.superfluid("runtime", "check", "basert", "--basert-lib", str(lib))
    assert run.code == 1 and "states ABI 2; this superfluid drives ABI 1" in run.stderr
    fix = run.fix("install")
    assert fix.argv == ("superfluid", "runtime", "install", "basert")
    assert fix.does == "installs one this superfluid drives"
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0 and (cli_home.path / "runtimes" / "basert" / "0.4.0-cpu").is_dir(), pasted.stderr


def test_a_library_that_is_no_libllama_checked_names_the_install_of_a_tested_build(
        cli_home: Home, engines: Path, release_server: ReleaseServer, libllama_v2: Path) -> None:
    release_server.add_release("ggml-org/llama.cpp", "b11642",
                               {"llama-b11642-bin-ubuntu-x64.tar.gz": releases.libllama_archive(libllama_v2)})
    cli_home.env.update(SUPERFLUID_GITHUB_API=release_server.url, SUPERFLUID_HOST_VULKAN="0",
                        SUPERFLUID_HOST_NVIDIA_DRIVER="none", SUPERFLUID_HOST_ROCM="0")
    run = cli_home.superfluid("runtime", "check", "llamacpp", "--llamacpp-lib", str(engines / "0.4.0" / "libbaseRT.so"))
    assert run.code == 1 and "is a llama.cpp this adapter cannot drive" in run.stderr, run.stderr
    fix = run.fix("install")
    assert fix.argv == ("superfluid", "runtime", "install", "llamacpp")
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0 and (cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu").is_dir(), pasted.stderr
