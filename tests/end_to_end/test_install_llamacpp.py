"""``superfluid runtime install llamacpp`` end to end: a release of the tested build b11642 whose
archives hold a real libllama (the v2 build), on the loopback server (SPEC §4.2, §8)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.end_to_end.conftest import Home
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer

REPO = "ggml-org/llama.cpp"


@pytest.fixture
def llama_server(release_server: ReleaseServer, libllama_v2: Path) -> ReleaseServer:
    data = libllama_archive(libllama_v2)
    # the same CPU-only library under the CPU and the Vulkan names: the Vulkan one finds no device
    release_server.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": data,
                                                "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz": data})
    return release_server


def _install(home: Home, server: ReleaseServer, *flags: str):  # type: ignore[no-untyped-def]
    return home.superfluid("runtime", "install", "llamacpp", "--mirror", server.mirror_url, *flags)


def test_installs_the_newest_tested_build(cli_home: Home, llama_server: ReleaseServer) -> None:
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    run = _install(cli_home, llama_server)
    assert run.code == 0, run.stderr
    r = __import__("json").loads((cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu" / "runtime.json").read_text())
    assert (r["version"], r["backend"], r["tested"], r["chosen_by"]) == ("b11642", "cpu", True, "tested")
    rows = cli_home.superfluid("runtimes", "--json").json()
    row = next(x for x in rows if x["id"] == "llamacpp")
    assert row["state"] == "ready" and row["install"] == "b11642-cpu"


def test_gpu_plan_without_its_device_falls_back_to_cpu(cli_home: Home, llama_server: ReleaseServer) -> None:
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "1"
    run = _install(cli_home, llama_server, "--dry-run", "--json")
    assert [p["install"] for p in run.json()["plans"]] == ["b11642-vulkan", "b11642-cpu"]
    run = _install(cli_home, llama_server, "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["installed"] == "b11642-cpu"
    assert doc["fallbacks"][0]["install"] == "b11642-vulkan" and "no vulkan device" in doc["fallbacks"][0]["why"]
    assert sorted(os.listdir(cli_home.path / "runtimes" / "llamacpp")) == [".install.lock", "b11642-cpu", "current"]


def test_untested_build_refused_without_untested(cli_home: Home, llama_server: ReleaseServer) -> None:
    run = _install(cli_home, llama_server, "--version", "b11700")
    assert run.code == 1 and "is not a build this adapter was tested with" in run.stderr


def test_listing_digest_mismatch_installs_nothing(cli_home: Home, llama_server: ReleaseServer) -> None:
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    name = "llama-b11642-bin-ubuntu-x64.tar.gz"
    llama_server.fault(llama_server.mirror_path(REPO, "b11642", name), "wrong_bytes", times=100)
    run = _install(cli_home, llama_server)
    assert run.code == 1 and "SHA-256" in run.stderr
    assert not (cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu").exists()


def test_receipt_records_the_tested_layout(cli_home: Home, llama_server: ReleaseServer) -> None:
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    assert _install(cli_home, llama_server).code == 0
    r = __import__("json").loads((cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu" / "runtime.json").read_text())
    assert r["layout"] == "v2"


def test_v1_library_under_the_b11642_name_is_refused(cli_home: Home, libllama_v1: Path) -> None:
    """Issue 14 item 1: b11642 was tested as v2; a release of that name whose libllama is laid out as
    v1 (the real v1 build) installs nothing, and says why."""
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    with ReleaseServer() as s:
        s.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": libllama_archive(libllama_v1)})
        run = _install(cli_home, s)
    assert run.code == 1, run.stderr
    assert "is laid out as v1, but llamacpp b11642 was tested as v2" in run.stderr
    assert "Traceback" not in run.stderr
    root = cli_home.path / "runtimes" / "llamacpp"
    assert sorted(os.listdir(root)) == [".install.lock"]


def _api_env(home: Home, server: ReleaseServer, **facts: str) -> None:
    home.env.update(SUPERFLUID_GITHUB_API=server.url, SUPERFLUID_HOST_VULKAN="0", **facts)


def test_offline_install_and_update_without_version_after_an_online_install(cli_home: Home,
                                                                            llama_server: ReleaseServer) -> None:
    """Issue 14 item 4: what installed online (the API's /releases/tags, no --version) installs
    again from the cache with --offline, without --version, and opens no connection."""
    _api_env(cli_home, llama_server)
    assert cli_home.superfluid("runtime", "install", "llamacpp").code == 0
    (cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu" / "runtime.json").write_text("broken")
    llama_server.clear_log()
    for argv in (["runtime", "install", "llamacpp", "--offline"], ["runtime", "repair", "llamacpp", "--offline"],
                 ["runtime", "update", "llamacpp", "--offline"], ["runtime", "install", "llamacpp", "--offline",
                                                                   "--dry-run", "--json"]):
        run = cli_home.superfluid(*argv)
        assert run.code == 0, (argv, run.stderr)
        assert "Traceback" not in run.stderr
    assert llama_server.log == []  # no connection at all
    r = json.loads((cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu" / "runtime.json").read_text())
    assert (r["version"], r["layout"]) == ("b11642", "v2")


def test_a_backend_the_release_lacks_falls_back_to_the_next_plan(cli_home: Home, llama_server: ReleaseServer) -> None:
    """Issue 14 item 5: CUDA host facts and a release with the CPU archive only (and a Vulkan one):
    the CUDA plan is 'not in this release' (not 'no digest'), and the next plan is tried."""
    _api_env(cli_home, llama_server, SUPERFLUID_HOST_NVIDIA_DRIVER="580.95.05", SUPERFLUID_HOST_CUDA_RUNTIME="13")
    dry = cli_home.superfluid("runtime", "install", "llamacpp", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    plans = dry.json()["plans"]
    assert [p["install"] for p in plans][:2] == ["b11642-cuda-13.4", "b11642-cpu"]
    from superfluid.runtime.kernel.schema import errors

    assert errors(dry.json(), "plan") == []
    assert plans[0]["assets"][0]["digest_source"] == "absent" and plans[0]["assets"][0]["sha256"] is None
    text = cli_home.superfluid("runtime", "install", "llamacpp", "--dry-run")
    assert text.code == 0 and "not in this release" in text.stdout
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["installed"] == "b11642-cpu"
    assert doc["fallbacks"][0] == {"install": "b11642-cuda-13.4",
                                   "why": "llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz is not in this release"}
    human = cli_home.superfluid("runtime", "install", "llamacpp", "--reinstall")  # installed: told only when forced
    assert human.code == 0 and "is not in this release; falling back to the next" in human.stderr
    assert "no SHA-256" not in human.stderr


def test_every_plan_absent_installs_nothing_and_says_why(cli_home: Home, libllama_v2: Path) -> None:
    cli_home.env.update(SUPERFLUID_HOST_VULKAN="0")
    with ReleaseServer() as s:
        s.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-arm64.tar.gz": libllama_archive(libllama_v2)})
        _api_env(cli_home, s)
        run = cli_home.superfluid("runtime", "install", "llamacpp", "--version", "b11642")
    assert run.code == 1 and "Traceback" not in run.stderr
    assert "llama-b11642-bin-ubuntu-x64.tar.gz is not in this release" in run.stderr
    assert not (cli_home.path / "runtimes" / "llamacpp").exists() or \
        sorted(os.listdir(cli_home.path / "runtimes" / "llamacpp")) in ([], [".install.lock"])
