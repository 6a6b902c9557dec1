"""``runtime/llamacpp/planner``: a CUDA, ROCm or Vulkan build is planned only where it can run its
kernels (issue 32, item 2): tables of injected host facts, each refusal shown with its reason and the
next plan taken; through the real ``superfluid runtime install --dry-run --json`` too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.host import Host, detect
from superfluid.runtime.hostfacts.kernels import Kernels, cuda_refusal, cudart_serves, from_cmake, upstream_cuda_kernels
from superfluid.runtime.llamacpp.planner import kernels_of, plan, recorded_kernels
from superfluid.runtime.llamacpp.recipe import load, parse_name
from superfluid.runtime.planning import Request
from tests.conftest import Home
from tests.release_server import ReleaseServer

GPUS = {"pascal": "6.1", "turing": "7.5", "ampere": "8.6", "hopper": "9.0"}


def _nvidia(gpu: str, driver: str, **facts: object) -> Host:
    return Host(os="linux", arch="x64", nvidia_driver=driver, cuda_capabilities=(GPUS[gpu],),
                **facts)  # type: ignore[arg-type]


def _shown(host: Host) -> list[tuple[str, str | None]]:
    """``(install, refused)`` of each b11642 plan (the newest tested build's)."""
    return [(p.install, p.refused) for p in plan(Request(id="llamacpp"), load(), host) if p.version == "b11642"]


def test_the_recipe_records_upstream_s_kernels() -> None:
    recipe = load()
    k13 = recorded_kernels(recipe, "b11642", "llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz")
    assert k13 == upstream_cuda_kernels((13, 4)) and k13 is not None and k13.lowest() == "sm_75"
    assert k13.cubin == ("sm_86", "sm_89", "sm_120a", "sm_121a") and k13.ptx == ("sm_75", "sm_80", "sm_90")
    k12 = recorded_kernels(recipe, "b11284", "llama-b11284-bin-ubuntu-cuda-12.8-x64.tar.gz")
    assert k12 is not None and k12.ptx[:3] == ("sm_50", "sm_61", "sm_70") and "sm_120a" in k12.cubin
    rocm = recorded_kernels(recipe, "b11642", "llama-b11642-bin-ubuntu-rocm-10.0-x64.tar.gz")
    assert rocm is not None and {"gfx90a", "gfx1100"} <= set(rocm.gfx)
    assert "release.yml" in recipe["kernels_about"] and "CMakeLists.txt" in recipe["kernels_about"]
    untested = parse_name("llama-b9-bin-ubuntu-cuda-13.1-x64.tar.gz")
    assert untested is not None and kernels_of(recipe, "b9", untested) == upstream_cuda_kernels((13, 1))


# (gpu, driver) -> the b11642 plans in order: (install, the start of the reason it is refused, or None)
CUDA_TABLE = [
    ("pascal", "580.95.05", [("b11642-cuda-13.4", "this host's GPU is sm_61; this build's kernels start at sm_75"),
                             ("b11642-cuda-12.8", None), ("b11642-cpu", None)]),
    ("turing", "580.95.05", [("b11642-cuda-13.4", None), ("b11642-cpu", None)]),
    ("ampere", "580.95.05", [("b11642-cuda-13.4", None), ("b11642-cpu", None)]),
    ("hopper", "580.95.05", [("b11642-cuda-13.4", None), ("b11642-cpu", None)]),
    # driver 550 runs CUDA 12, but compiles (JIT) PTX of CUDA 12.8 only from driver 570 on
    ("pascal", "550.54.14", [("b11642-cuda-12.8", "this host's GPU is sm_61, which runs this build only as PTX "
                                                  "from CUDA 12.8; NVIDIA driver 550.54.14 compiles it from driver "
                                                  "570 on"), ("b11642-cpu", None)]),
    ("turing", "550.54.14", [("b11642-cuda-12.8", "this host's GPU is sm_75, which runs this build only as PTX"),
                             ("b11642-cpu", None)]),
    ("ampere", "550.54.14", [("b11642-cuda-12.8", None), ("b11642-cpu", None)]),  # sm_86 machine code
    ("hopper", "550.54.14", [("b11642-cuda-12.8", "this host's GPU is sm_90, which runs this build only as PTX"),
                             ("b11642-cpu", None)]),
    ("ampere", "525.60.13", [("b11642-cuda-12.8", None), ("b11642-cpu", None)]),
    ("pascal", "525.60.13", [("b11642-cuda-12.8", "this host's GPU is sm_61, which runs this build only as PTX"),
                             ("b11642-cpu", None)]),
]


@pytest.mark.parametrize(("gpu", "driver", "shown"), CUDA_TABLE, ids=[f"{g}-{d[:3]}" for g, d, _ in CUDA_TABLE])
def test_a_cuda_build_is_planned_only_where_its_kernels_run(gpu: str, driver: str,
                                                            shown: list[tuple[str, str | None]]) -> None:
    got = _shown(_nvidia(gpu, driver))
    assert [i for i, _ in got] == [i for i, _ in shown]
    for (_, refused), (_, said) in zip(got, shown, strict=True):
        assert (refused is None) is (said is None), refused
        assert said is None or (refused or "").startswith(said), refused


def test_a_gpu_not_known_refuses_nothing() -> None:
    assert _shown(Host(os="linux", arch="x64", nvidia_driver="580.95.05"))[0] == ("b11642-cuda-13.4", None)


def test_every_gpu_must_be_covered_and_a_name_is_said() -> None:
    host = Host(os="linux", arch="x64", nvidia_driver="580.95.05", cuda_capabilities=("8.6", "6.1"),
                gpu_names=("NVIDIA GeForce RTX 3090", "NVIDIA GeForce GTX 1080"))
    said = cuda_refusal(host, (13, 4), upstream_cuda_kernels((13, 4)))
    assert said == "NVIDIA GeForce GTX 1080 is sm_61; this build's kernels start at sm_75"
    # an 'a' architecture runs on exactly that GPU; a cubin runs on a later minor of its major
    assert cuda_refusal(Host(os="linux", arch="x64", cuda_capabilities=("12.1",)), (13, 0), from_cmake("120a-real")) \
        is not None
    assert cuda_refusal(Host(os="linux", arch="x64", cuda_capabilities=("8.9",)), (12, 4),
                        from_cmake("86-real")) is None
    assert cuda_refusal(Host(os="linux", arch="x64", cuda_capabilities=("9.0",)), (12, 4), from_cmake("86-real")) == \
        "this host's GPU is sm_90; this build carries machine code for sm_86, none of which runs on it"
    assert cuda_refusal(Host(os="linux", arch="x64", nvidia_driver="470.1", cuda_capabilities=("8.6",)), (12, 8),
                        None) == \
        "NVIDIA driver 470 runs CUDA 12 builds from driver 525 on"
    assert cuda_refusal(Host(os="linux", arch="x64", cuda_capabilities=("8.6",)), (12, 8), Kernels()) is None


# the system's CUDA runtime: (its facts, the note of the b11642 CUDA 12.8 plan, whether the cudart archive comes)
RUNTIME_TABLE = [
    ({}, "no CUDA 12 runtime on the system, so its archive too", True),
    ({"cuda_runtime": 12, "cuda_runtime_version": "12.8", "cuda_runtime_reachable": True},
     "the system's CUDA 12 runtime serves it", False),
    ({"cuda_runtime": 12, "cuda_runtime_version": "12.9", "cuda_runtime_reachable": None},
     "the system's CUDA 12 runtime serves it", False),
    ({"cuda_runtime": 12, "cuda_runtime_version": "12.8", "cuda_runtime_reachable": False},
     "the system's CUDA 12 runtime is on none of the loader's paths, so its archive too", True),
    ({"cuda_runtime": 12, "cuda_runtime_version": "12.4", "cuda_runtime_reachable": True},
     "the system's CUDA runtime 12.4 is older than this build's 12.8, so its archive too", True),
]


@pytest.mark.parametrize(("facts", "note", "side"), RUNTIME_TABLE, ids=["none", "reached", "reach-unknown",
                                                                         "off-the-loader-path", "older"])
def test_a_system_cuda_runtime_counts_only_when_reached_and_new_enough(facts: dict[str, object], note: str,
                                                                        side: bool) -> None:
    host = _nvidia("ampere", "550.54.14", **facts)
    first = plan(Request(id="llamacpp"), load(), host)[0]
    assert first.install == "b11642-cuda-12.8" and first.refused is None
    assert first.why.endswith(note), first.why
    assert any(a.name.startswith("cudart-") for a in first.assets) is side
    assert (cudart_serves(host, (12, 8)) is None) is (not side)


# ROCm: (host's ROCm version, its gfx targets) -> the refusal of b11642's rocm-10.0 plan (None: it is taken)
ROCM_TABLE = [
    ("10.0.1", ("gfx90a",), None),
    ("10.0.1", ("gfx1100",), None),
    ("10.0.1", ("gfx1012",), "this host's GPU is gfx1012; this build's kernels are for gfx908, gfx90a"),
    ("6.4.1", ("gfx90a",), "this build needs ROCm 10; this host has ROCm 6.4.1"),
    ("7.0.2", ("gfx1100",), "this build needs ROCm 10; this host has ROCm 7.0.2"),
    (None, (), None),
]


@pytest.mark.parametrize(("version", "gfx", "said"), ROCM_TABLE, ids=["10-gfx90a", "10-gfx1100", "10-gfx1012",
                                                                     "6-gfx90a", "7-gfx1100", "not-known"])
def test_a_rocm_build_needs_the_host_s_major_and_a_gpu_it_carries(version: str | None, gfx: tuple[str, ...],
                                                                  said: str | None) -> None:
    host = Host(os="linux", arch="x64", rocm=True, rocm_version=version, rocm_gfx=gfx)
    shown = _shown(host)
    assert shown[0][0] == "b11642-rocm-10.0"
    assert (shown[0][1] is None) is (said is None) and (said is None or (shown[0][1] or "").startswith(said))
    assert shown[-1] == ("b11642-cpu", None)


@pytest.mark.parametrize(("icd", "vulkan"), [(True, True), (False, False)], ids=["with-an-icd", "without-an-icd"])
def test_vulkan_needs_a_loader_and_an_icd(tmp_path: Path, icd: bool, vulkan: bool) -> None:
    lib = tmp_path / "usr/lib64"
    lib.mkdir(parents=True)
    (lib / "libvulkan.so.1").write_bytes(b"")
    if icd:
        (tmp_path / "usr/share/vulkan/icd.d").mkdir(parents=True)
        (tmp_path / "usr/share/vulkan/icd.d/lvp_icd.x86_64.json").write_text("{}")
    host = detect({"SUPERFLUID_HOST_ROOT": str(tmp_path), "SUPERFLUID_HOST_LIBRARY_PATH": "/usr/lib64",
                   "SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64"})
    assert host.vulkan is vulkan and bool(host.vulkan_icds) is icd
    assert ("b11642-vulkan" in [i for i, _ in _shown(host)]) is vulkan


def _dry_run(cli_home: Home, tmp_path: Path, capability: str) -> dict[str, object]:
    server = ReleaseServer()  # never started: written as a mirror folder
    names = [a["name"] for a in load()["tested"][0]["assets"]]
    server.add_release("ggml-org/llama.cpp", "b11642", {n: b"x" for n in names})
    mirror = server.write_mirror(tmp_path / f"mirror-{capability}")
    cli_home.env.update({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64",
                         "SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05", "SUPERFLUID_HOST_CUDA_CAPABILITY": capability,
                         "SUPERFLUID_HOST_CUDA_RUNTIME": "none", "SUPERFLUID_HOST_VULKAN": "0",
                         "SUPERFLUID_HOST_ROCM": "0"})
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", str(mirror), "--dry-run", "--json")
    assert run.code == 0, run.stderr
    doc = json.loads(run.stdout)
    assert isinstance(doc, dict)
    return doc


def _plans(doc: object) -> list[dict[str, object]]:
    """Every plan object in a dry run's JSON, wherever it sits."""
    out: list[dict[str, object]] = []
    if isinstance(doc, dict):
        if "install" in doc and "backend" in doc:
            out.append(doc)
        for v in doc.values():
            out += _plans(v)
    elif isinstance(doc, list):
        for v in doc:
            out += _plans(v)
    return out


def test_done_when_pascal_is_offered_no_cuda_13_build_and_ampere_is(cli_home: Home, tmp_path: Path) -> None:
    """Issue 32, done when: with Pascal (sm_61) and driver 580 the dry run offers no CUDA 13 build and
    gives the reason; with Ampere (sm_86) it does."""
    pascal = _plans(_dry_run(cli_home, tmp_path, "6.1"))
    cuda13 = [p for p in pascal if p.get("install") == "b11642-cuda-13.4"]
    assert cuda13 and all("sm_61; this build's kernels start at sm_75" in str(p.get("refused")) for p in cuda13)
    offered = [p for p in pascal if not p.get("refused")]
    assert offered and offered[0]["install"] == "b11642-cuda-12.8"
    ampere = _plans(_dry_run(cli_home, tmp_path, "8.6"))
    assert [p for p in ampere if not p.get("refused")][0]["install"] == "b11642-cuda-13.4"


def test_a_plan_that_trusts_the_system_cuda_runtime_carries_its_cudart_retry() -> None:
    """Issue 32, item 4: a CUDA plan that leaves the CUDA runtime to the system carries, as its
    retry, the same build with its cudart archive (tried when its GPU module misses the runtime); a
    plan that fetches the archive already carries none, nor does a CPU plan."""
    trusting = plan(Request(id="llamacpp"), load(), _nvidia("ampere", "550.54.15", cuda_runtime=12,
                                                         cuda_runtime_version="12.8", cuda_runtime_reachable=True))
    first = trusting[0]
    assert first.install == "b11642-cuda-12.8" and [a.name for a in first.assets] == [
        "llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz"]
    assert first.retry is not None and first.retry.install == first.install
    assert [a.name for a in first.retry.assets] == ["llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz",
                                                    "cudart-llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz"]
    assert "did not find the system's CUDA 12 runtime" in first.retry.why
    assert first.to_json()["retry"]["assets"][1]["name"].startswith("cudart-")
    assert all(p.retry is None for p in trusting if p.backend == "cpu")
    fetching = plan(Request(id="llamacpp"), load(), _nvidia("ampere", "550.54.15"))
    assert len(fetching[0].assets) == 2 and fetching[0].retry is None
