from __future__ import annotations

from superfluid.runtime.host import detect


def test_overrides_set_every_fact() -> None:
    host = detect({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "arm64",
                   "SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05", "SUPERFLUID_HOST_CUDA_RUNTIME": "13",
                   "SUPERFLUID_HOST_ROCM": "0", "SUPERFLUID_HOST_VULKAN": "1", "SUPERFLUID_HOST_GLIBC": "2.39",
                   "SUPERFLUID_HOST_MEMORY": "1000"})
    assert (host.platform, host.nvidia_driver, host.cuda_runtime, host.rocm, host.vulkan, host.glibc, host.memory) == (
        "linux-arm64", "580.95.05", 13, False, True, "2.39", 1000)
    assert host.describe() == "Linux arm64, NVIDIA driver 580.95.05, CUDA runtime 13, Vulkan"


def test_none_override_clears_a_fact() -> None:
    host = detect({"SUPERFLUID_HOST_NVIDIA_DRIVER": "none", "SUPERFLUID_HOST_CUDA_RUNTIME": "none"})
    assert host.nvidia_driver is None and host.cuda_runtime is None
