"""Refusals said before a byte is fetched, through the real ``superfluid`` (issue 42, items 6, 7, 8): a
refusal the recipe alone decides comes before any release listing is asked (no network, no cache);
a dry run whose every plan is refused exits as the install would (1) and says so; a build named
with ``--backend`` whose GPU stack this host lacks is refused before its download, naming the fact
and the ``SUPERFLUID_HOST_*`` override; and the worker's untested-build hint, pasted, installs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import cli
from tests.conftest import Home
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer

REPO = "ggml-org/llama.cpp"
#: a Linux x64 host with no accelerator at all, whatever this machine has
NO_GPU = {"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64", "SUPERFLUID_HOST_NVIDIA_DRIVER": "none",
          "SUPERFLUID_HOST_CUDA_RUNTIME": "none", "SUPERFLUID_HOST_ROCM": "0", "SUPERFLUID_HOST_VULKAN": "0"}
#: an API no test can reach: a listing asked of it fails at once
UNREACHABLE = {"SUPERFLUID_GITHUB_API": "http://127.0.0.1:9"}


@pytest.mark.parametrize("flags", [(), ("--dry-run",), ("--offline",), ("--dry-run", "--offline")],
                         ids=["install", "dry-run", "offline", "dry-run-offline"])
def test_a_glibc_every_build_needs_more_of_is_refused_before_any_listing(cli_home: Home,
                                                                         flags: tuple[str, ...]) -> None:
    """Item 6: glibc 2.28, which every tested build's recorded needs refuse: the recipe's refusal,
    never the network's nor the empty cache's."""
    cli_home.env.update(NO_GPU, SUPERFLUID_HOST_GLIBC="2.28", **UNREACHABLE)
    run = cli_home.superfluid("runtime", "install", "llamacpp", *flags)
    assert run.code == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("superfluid: no llamacpp build installs here: b11642-cpu: ")
    assert "needs GLIBC_2.34; this host has glibc 2.28" in last and "b11284-cpu: " in last
    assert "cannot reach" not in run.stderr and "release listing" not in run.stderr
    assert not (cli_home.path / "runtimes" / "llamacpp").exists()


@pytest.mark.parametrize(("backend", "fact", "override"), [
    ("cuda", "needs an NVIDIA driver, and this host has none", "SUPERFLUID_HOST_NVIDIA_DRIVER=<version>"),
    ("rocm", "needs ROCm, and this host has none", "SUPERFLUID_HOST_ROCM=1"),
])
def test_a_named_gpu_backend_without_its_stack_is_refused_before_download(
        cli_home: Home, release_server: ReleaseServer, libllama_v2: Path, backend: str, fact: str,
        override: str) -> None:
    """Item 8: ``--backend cuda|rocm`` on a host without the driver: refused before any listing or
    download (as ``--backend vulkan`` without a Vulkan loader), naming the fact and its override."""
    data = libllama_archive(libllama_v2)
    release_server.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": data,
                                                "llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz": data,
                                                "cudart-llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz": data,
                                                "llama-b11642-bin-ubuntu-rocm-10.0-x64.tar.gz": data})
    cli_home.env.update(NO_GPU)
    for flags in (("--dry-run",), ()):
        run = cli_home.superfluid("runtime", "install", "llamacpp", "--backend", backend, "--version", "b11642",
                                  "--mirror", release_server.mirror_url, *flags)
        assert run.code == 1, run.stderr
        assert f"superfluid: llamacpp b11642-{backend}" in run.stderr and fact in run.stderr
        assert override in run.stderr
    assert [r.path for r in release_server.log] == []  # not even the listing was asked
    assert not (cli_home.path / "runtimes" / "llamacpp").exists()
    # the same line with the override that states the stack plans it (the probe is then the judge)
    cli_home.env.update({"SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05"} if backend == "cuda"
                        else {"SUPERFLUID_HOST_ROCM": "1"})
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--backend", backend, "--version", "b11642",
                              "--mirror", release_server.mirror_url, "--dry-run", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["plans"][0]["backend"].startswith(backend) and "refused" not in run.json()["plans"][0]


def test_a_dry_run_whose_every_plan_is_refused_exits_1_and_says_so(cli_home: Home, release_server: ReleaseServer,
                                                                   libllama_v2: Path) -> None:
    """Item 7: the listing decides (its b11642 publishes no CPU archive, b11284 is not in it): the
    dry run ends as the install would, exit 1 with the install's words; ``--json`` keeps the plans."""
    release_server.add_release(REPO, "b11642", {"llama-b11642-bin-ubuntu-vulkan-x64.tar.gz":
                                                libllama_archive(libllama_v2)})
    cli_home.env.update(NO_GPU)
    flags = ("runtime", "install", "llamacpp", "--mirror", release_server.mirror_url)
    dry = cli_home.superfluid(*flags, "--dry-run")
    assert dry.code == 1, dry.stderr
    said = "superfluid: llamacpp b11642-cpu: llama-b11642-bin-ubuntu-x64.tar.gz is not in this release"
    assert dry.stderr.strip().splitlines()[-1].startswith(said + ": ")
    as_json = cli_home.superfluid(*flags, "--dry-run", "--json")
    assert as_json.code == 1
    doc = as_json.json()
    assert [p["install"] for p in doc["plans"]] == ["b11642-cpu"] and doc["dry_run"] is True
    assert doc["error"]["code"] == "not-installable" and doc["error"]["exit"] == 1
    run = cli_home.superfluid(*flags)
    assert run.code == 1 and run.stderr.strip().splitlines()[-1] == dry.stderr.strip().splitlines()[-1]  # the same
    lists = run.fix("versions")
    assert lists.argv == ("superfluid", "runtime", "versions", "llamacpp", "--mirror", release_server.mirror_url)
    pasted = cli.paste(lists, run, env=cli_home.env)
    assert "b11642 does not install here: llamacpp b11642-cpu: llama-b11642-bin-ubuntu-x64.tar.gz is not in this " \
           "release" in pasted.stdout


def test_the_workers_untested_build_hint_pasted_installs_it(cli_home: Home, release_server: ReleaseServer,
                                                            libllama_v2: Path) -> None:
    """The worker plans from the recipe alone: an untested build's archives are its release's, and its
    hint is the install that reads that listing (the mirror named by SUPERFLUID_MIRROR here)."""
    release_server.add_release(REPO, "b11500", {"llama-b11500-bin-ubuntu-x64.tar.gz": libllama_archive(libllama_v2)})
    cli_home.env.update(NO_GPU, SUPERFLUID_MIRROR=release_server.mirror_url)
    run = cli.run("superfluid-worker-llamacpp", "plan", "--version", "b11500", "--untested", env=cli_home.env)
    assert run.code == 1 and "known only from the release listing" in run.stderr
    fix = run.fix("install", "--untested")
    assert fix.argv == ("superfluid", "runtime", "install", "llamacpp", "--version", "b11500", "--untested")
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0, pasted.stderr
    assert (cli_home.path / "runtimes" / "llamacpp" / "b11500-cpu").is_dir()


@pytest.mark.parametrize("flags", [("--from", "{archive}"), ("--dry-run",)], ids=["from", "listing"])
def test_mlx_off_apple_silicon_names_its_versions(cli_home: Home, tmp_path: Path, flags: tuple[str, ...]) -> None:
    """MLX installs nothing on Linux x64, by its archive or its (absent) listing: the hint lists its
    tested versions and why, which a paste shows."""
    archive = tmp_path / "mlx.tar.gz"
    archive.write_bytes(b"")
    cli_home.env.update(NO_GPU)
    run = cli_home.superfluid("runtime", "install", "mlx", *(f.format(archive=archive) for f in flags))
    assert run.code == 1 and "Apple silicon" in run.stderr, run.stderr
    fix = run.fix("versions")
    assert fix.argv == ("superfluid", "runtime", "versions", "mlx")
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0 and "MLX runs on Apple silicon only" in pasted.stdout, pasted.stdout
