from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.runtime import host
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


def _touch(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")


@pytest.mark.parametrize(("files", "expected"), [
    ({"a": ["libcudart.so.12", "libcublas.so.12"]}, 12),
    ({"a": ["libcudart.so.12.4.127", "libcublas.so.12.4.5.8", "libcudart.so.13", "libcublas.so.13"]}, 13),
    ({"a": ["libcudart.so.13"], "b": ["libcublas.so.13"]}, None),  # runtime and cuBLAS in one folder
    ({"a": ["libcudart.so.12", "libcublas.so.11"]}, None),  # one major for both
    ({"a": ["libcudart.so", "libcublas.so", "libcudart.so.x", "libcublas.so.x"]}, None),  # no major
    ({"a": ["libcudart.so.11", "libcublas.so.11"], "b": ["libcudart.so.13", "libcublas.so.13"]}, 13),
    ({}, None),
])
def test_the_cuda_runtime_is_the_newest_major_with_its_blas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             files: dict[str, list[str]], expected: int | None) -> None:
    for folder, names in files.items():
        _touch(tmp_path / folder, *names)
    monkeypatch.setattr(host, "_CUDA_DIRS", (str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "absent")))
    assert host._cuda_runtime() == expected


@pytest.mark.parametrize(("loader", "icd", "expected"), [
    ("x86_64-linux-gnu/libvulkan.so.1", "intel_icd.x86_64.json", True),
    ("libvulkan.so.1", "lvp_icd.json", True),
    ("x86_64-linux-gnu/libvulkan.so.1", None, False),  # no driver
    (None, "intel_icd.x86_64.json", False),  # no loader
    ("x86_64-linux-gnu/libvulkan.so.1.3.239", "intel_icd.x86_64.json", False),  # not the name programs open
    ("x86_64-linux-gnu/libvulkan.so.1", "README.txt", False),
])
def test_vulkan_needs_its_loader_and_a_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: str | None,
                                              icd: str | None, expected: bool) -> None:
    lib, icds = tmp_path / "usr-lib", tmp_path / "icd.d"
    lib.mkdir()
    (lib / "python3").mkdir()
    if loader:
        _touch(lib / os.path.dirname(loader), os.path.basename(loader))
    if icd:
        _touch(icds, icd)
    monkeypatch.setattr(host, "_USR_LIB", str(lib))
    monkeypatch.setattr(host, "_VULKAN_ICD_DIRS", (str(icds), str(tmp_path / "absent")))
    assert host._vulkan() is expected
