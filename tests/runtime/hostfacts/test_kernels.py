"""``runtime.kernels``: what a GPU build's kernels run on, as data, and the verdicts on a host's GPUs
(the planner's tables of whole hosts are ``tests/llamacpp/test_planner_gpu.py``)."""

from __future__ import annotations

import doctest
from dataclasses import replace
from typing import Any

import pytest

from superfluid.runtime.hostfacts import kernels as kernels_module
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.hostfacts.kernels import (
    InvalidKernels,
    Kernels,
    arch_key,
    covers,
    cuda_refusal,
    cudart_serves,
    from_cmake,
    rocm_refusal,
    upstream_cuda_kernels,
)

LINUX = Host(os="linux", arch="x64")


@pytest.mark.parametrize(("arch", "key"), [("sm_86", (8, 6, "")), ("sm_120a", (12, 0, "a")), ("sm_5", None),
                                           ("compute_86", None), ("", None)])
def test_arch_key(arch: str, key: tuple[int, int, str] | None) -> None:
    assert arch_key(arch) == key


def test_cmake_architectures_read_as_cubin_and_ptx() -> None:
    assert from_cmake("75-virtual;86-real;90") == Kernels(("sm_86", "sm_90"), ("sm_75", "sm_90"))
    assert from_cmake("") == Kernels()


@pytest.mark.parametrize(("cuda", "lowest"), [((13, 4), "sm_75"), ((12, 8), "sm_50"), ((12, 4), "sm_50")])
def test_upstream_builds_start_where_their_toolkit_does(cuda: tuple[int, int], lowest: str) -> None:
    assert upstream_cuda_kernels(cuda).lowest() == lowest


@pytest.mark.parametrize("doc", [[], {"cubin": "sm_86"}, {"ptx": ["sm_x"]}, {"gfx": ["sm_86"]}],
                         ids=["not-an-object", "not-a-list", "bad-arch", "bad-gfx"])
def test_a_kernels_record_that_is_not_one_is_refused(doc: Any) -> None:
    with pytest.raises(InvalidKernels, match="kernels"):
        Kernels.from_json(doc)


def test_a_record_reads_back() -> None:
    k = Kernels(("sm_86",), ("sm_75",), ())
    assert Kernels.from_json(k.to_json()) == k and k.to_json() == {"cubin": ["sm_86"], "ptx": ["sm_75"]}


@pytest.mark.parametrize(("driver", "caps", "cuda", "fragment"), [
    ("580.95", ("6.1",), (13, 4), "is sm_61; this build's kernels start at sm_75"),
    ("580.95", ("8.6",), (13, 4), None),
    ("550.54", ("8.6",), (13, 4), "runs CUDA 13 builds from driver 580 on"),
    ("550.54", ("6.1",), (12, 4), None),  # PTX for sm_61 from a toolkit the driver knows
    (None, (), (13, 4), None),  # nothing known: nothing refused
], ids=["pascal-cuda13", "ampere-cuda13", "old-driver", "pascal-cuda12", "unknown"])
def test_cuda_refusal(driver: str | None, caps: tuple[str, ...], cuda: tuple[int, int], fragment: str | None) -> None:
    host = replace(LINUX, nvidia_driver=driver, cuda_capabilities=caps)
    why = cuda_refusal(host, cuda, upstream_cuda_kernels(cuda))
    assert (why is None) if fragment is None else (why is not None and fragment in why)


# (architecture, cubin or PTX, the GPU's compute capability, runs?) by NVIDIA's rules (issue 44, item 4)
COVERS = [
    ("sm_86", "cubin", "8.6", True), ("sm_86", "cubin", "8.9", True), ("sm_86", "cubin", "8.0", False),
    ("sm_86", "cubin", "9.0", False), ("sm_86", "ptx", "9.0", True), ("sm_86", "ptx", "12.1", True),
    ("sm_86", "ptx", "8.0", False),
    # a: that compute capability alone, cubin and PTX alike
    ("sm_120a", "cubin", "12.0", True), ("sm_120a", "cubin", "12.1", False), ("sm_100a", "cubin", "10.0", True),
    ("sm_100a", "cubin", "10.3", False), ("sm_90a", "cubin", "10.0", False), ("sm_90a", "ptx", "9.0", True),
    ("sm_90a", "ptx", "10.0", False), ("sm_120a", "ptx", "12.1", False), ("sm_121a", "cubin", "12.0", False),
    # f: its major, at its minor or above, PTX too
    ("sm_100f", "cubin", "10.0", True), ("sm_100f", "cubin", "10.3", True), ("sm_103f", "cubin", "10.0", False),
    ("sm_100f", "cubin", "11.0", False), ("sm_100f", "ptx", "10.3", True), ("sm_100f", "ptx", "11.0", False),
    ("sm_100f", "ptx", "12.0", False), ("sm_120f", "ptx", "12.1", True), ("sm_121f", "ptx", "12.0", False),
    ("sm_100f", "ptx", "9.0", False),
]


@pytest.mark.parametrize(("arch", "kind", "gpu", "runs"), COVERS, ids=[f"{a}-{k}-on-{g}" for a, k, g, _ in COVERS])
def test_covers(arch: str, kind: str, gpu: str, runs: bool) -> None:
    key = arch_key(arch)
    assert key is not None
    major, minor = (int(p) for p in gpu.split("."))
    assert covers(key, (major, minor), ptx=kind == "ptx") is runs


# (cubins, PTX, the GPU, the start of the refusal or None) with a CUDA 13.0 build on driver 580.65
SUFFIXED = [
    (("sm_120a",), (), "12.1", "this host's GPU is sm_121; this build carries machine code for sm_120a, none of "
                               "which runs on it (an architecture with an a suffix runs only on that very GPU)"),
    (("sm_120a",), (), "12.0", None),
    (("sm_100a",), (), "10.3", "this host's GPU is sm_103; this build carries machine code for sm_100a, none"),
    (("sm_100a",), (), "10.0", None),
    ((), ("sm_90a",), "10.0", "this host's GPU is sm_100; this build carries PTX for sm_90a, none of which"),
    ((), ("sm_90a",), "9.0", None),
    (("sm_100f",), ("sm_100f",), "10.3", None),
    ((), ("sm_100f",), "12.0", "this host's GPU is sm_120; this build carries PTX for sm_100f, none of which runs "
                               "on it (one with an f suffix only on GPUs of its major, at its minor or above)"),
    ((), ("sm_103f",), "10.0", "this host's GPU is sm_100; this build's kernels start at sm_103f"),
    (("sm_86", "sm_120a"), ("sm_75",), "12.1", None),  # llama.cpp's kind: PTX covers what the a cubin does not
]


@pytest.mark.parametrize(("cubin", "ptx", "gpu", "fragment"), SUFFIXED,
                         ids=[f"{'+'.join(c + p)}-on-{g}" for c, p, g, _ in SUFFIXED])
def test_cuda_refusal_keeps_the_suffixes(cubin: tuple[str, ...], ptx: tuple[str, ...], gpu: str,
                                         fragment: str | None) -> None:
    host = replace(LINUX, nvidia_driver="580.65.06", cuda_capabilities=(gpu,))
    why = cuda_refusal(host, (13, 0), Kernels(cubin, ptx))
    assert (why is None) if fragment is None else (why or "").startswith(fragment), why


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(kernels_module).failed == 0


@pytest.mark.parametrize(("rocm", "gfx", "fragment"), [
    ("10.0.1", ("gfx90a",), None),
    ("6.4.0", ("gfx90a",), "this build needs ROCm 10"),
    ("10.0.1", ("gfx803",), "this host's GPU is gfx803"),
    (None, (), None),
], ids=["match", "other-major", "other-gfx", "unknown"])
def test_rocm_refusal(rocm: str | None, gfx: tuple[str, ...], fragment: str | None) -> None:
    host = replace(LINUX, rocm_version=rocm, rocm_gfx=gfx)
    why = rocm_refusal(host, "10.0", Kernels(gfx=("gfx90a", "gfx1100")))
    assert (why is None) if fragment is None else (why is not None and fragment in why)


@pytest.mark.parametrize(("runtime", "reachable", "version", "fragment"), [
    (12, True, "12.8", None),
    (None, None, None, "no CUDA 12 runtime on the system"),
    (12, False, "12.8", "on none of the loader's paths"),
    (12, True, "12.4", "is older than this build's 12.8"),
], ids=["serves", "none", "off-the-path", "older"])
def test_cudart_serves(runtime: int | None, reachable: bool | None, version: str | None, fragment: str | None) -> None:
    host = replace(LINUX, cuda_runtime=runtime, cuda_runtime_reachable=reachable, cuda_runtime_version=version)
    why = cudart_serves(host, (12, 8))
    assert (why is None) if fragment is None else (why is not None and fragment in why)
