"""``superfluid runtime install llamacpp`` end to end: a release of the tested build b11642 whose
archives hold a real libllama (the v2 build), on the loopback server (SPEC §4.2, §8)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.install.conftest import Home
from tests.install.releases import libllama_archive
from tests.release_server import ReleaseServer

REPO = "ggml-org/llama.cpp"


@pytest.fixture(scope="module")
def libllama_v2() -> Path:
    from tests.llamacpp.conftest import _build

    return _build("v2")


@pytest.fixture
def llama_server(libllama_v2: Path) -> ReleaseServer:
    data = libllama_archive(libllama_v2)
    with ReleaseServer() as s:
        # the same CPU-only library under the CPU and the Vulkan names: the Vulkan one finds no device
        s.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": data,
                                       "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz": data})
        yield s


def _install(home: Home, server: ReleaseServer, *flags: str):  # type: ignore[no-untyped-def]
    return home.superfluid("runtime", "install", "llamacpp", "--mirror", server.mirror_url, *flags)


def test_installs_the_newest_tested_build(home: Home, llama_server: ReleaseServer) -> None:
    home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    run = _install(home, llama_server)
    assert run.code == 0, run.stderr
    r = __import__("json").loads((home.path / "runtimes" / "llamacpp" / "b11642-cpu" / "runtime.json").read_text())
    assert (r["version"], r["backend"], r["tested"], r["chosen_by"]) == ("b11642", "cpu", True, "tested")
    rows = home.superfluid("runtimes", "--json").json()
    row = next(x for x in rows if x["id"] == "llamacpp")
    assert row["state"] == "ready" and row["install"] == "b11642-cpu"


def test_gpu_plan_without_its_device_falls_back_to_cpu(home: Home, llama_server: ReleaseServer) -> None:
    home.env["SUPERFLUID_HOST_VULKAN"] = "1"
    run = _install(home, llama_server, "--dry-run", "--json")
    assert [p["install"] for p in run.json()["plans"]] == ["b11642-vulkan", "b11642-cpu"]
    run = _install(home, llama_server, "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["installed"] == "b11642-cpu"
    assert doc["fallbacks"][0]["install"] == "b11642-vulkan" and "no vulkan device" in doc["fallbacks"][0]["why"]
    assert sorted(os.listdir(home.path / "runtimes" / "llamacpp")) == [".install.lock", "b11642-cpu", "current"]


def test_untested_build_refused_without_untested(home: Home, llama_server: ReleaseServer) -> None:
    run = _install(home, llama_server, "--version", "b11700")
    assert run.code == 1 and "is not a build this adapter was tested with" in run.stderr


def test_listing_digest_mismatch_installs_nothing(home: Home, llama_server: ReleaseServer) -> None:
    home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    name = "llama-b11642-bin-ubuntu-x64.tar.gz"
    llama_server.fault(llama_server.mirror_path(REPO, "b11642", name), "wrong_bytes", times=100)
    run = _install(home, llama_server)
    assert run.code == 1 and "SHA-256" in run.stderr
    assert not (home.path / "runtimes" / "llamacpp" / "b11642-cpu").exists()


@pytest.fixture(scope="module")
def libllama_v1() -> Path:
    from tests.llamacpp.conftest import _build

    return _build("v1")


def test_receipt_records_the_tested_layout(home: Home, llama_server: ReleaseServer) -> None:
    home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    assert _install(home, llama_server).code == 0
    r = __import__("json").loads((home.path / "runtimes" / "llamacpp" / "b11642-cpu" / "runtime.json").read_text())
    assert r["layout"] == "v2"


def test_v1_library_under_the_b11642_name_is_refused(home: Home, libllama_v1: Path) -> None:
    """Issue 14 item 1: b11642 was tested as v2; a release of that name whose libllama is laid out as
    v1 (the real v1 build) installs nothing, and says why."""
    home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    with ReleaseServer() as s:
        s.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": libllama_archive(libllama_v1)})
        run = _install(home, s)
    assert run.code == 1, run.stderr
    assert "is laid out as v1, but llamacpp b11642 was tested as v2" in run.stderr
    assert "Traceback" not in run.stderr
    root = home.path / "runtimes" / "llamacpp"
    assert sorted(os.listdir(root)) == [".install.lock"]
