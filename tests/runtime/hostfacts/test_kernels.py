"""``runtime.kernels``: what a GPU build's kernels run on, as data, and the verdicts on a host's GPUs
(the planner's tables of whole hosts are ``tests/llamacpp/test_planner_gpu.py``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.hostfacts.kernels import (
    InvalidKernels,
    Kernels,
    arch_key,
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
