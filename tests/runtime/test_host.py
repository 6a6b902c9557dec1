"""``runtime/host``: the host's facts, each overridden by its ``SUPERFLUID_HOST_*`` variable, and how
the CUDA runtime and Vulkan are found."""

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


@pytest.mark.parametrize(("value", "rocm"), [("1", True), ("yes", True), ("0", False), ("none", False), ("No", False),
                                           ("FALSE", False), ("", False)])
def test_a_flag_override_is_false_only_for_a_word_of_none(value: str, rocm: bool) -> None:
    assert detect({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ROCM": value}).rocm is rocm


def test_empty_overrides_fall_back_or_clear() -> None:
    probed = detect({})
    empty = detect({"SUPERFLUID_HOST_OS": "", "SUPERFLUID_HOST_ARCH": "", "SUPERFLUID_HOST_GLIBC": "",
                    "SUPERFLUID_HOST_MEMORY": ""})
    assert (empty.os, empty.arch, empty.memory) == (probed.os, probed.arch, probed.memory)  # empty: probed
    assert empty.glibc is None  # an empty glibc says there is none (musl)


def test_another_os_probes_no_linux_device() -> None:
    mac = detect({"SUPERFLUID_HOST_OS": "macos", "SUPERFLUID_HOST_ARCH": "arm64"})
    assert (mac.nvidia_driver, mac.cuda_runtime, mac.rocm, mac.vulkan) == (None, None, False, False)
    assert mac.describe() == "macOS arm64" and mac.platform == "macos-arm64"


@pytest.mark.parametrize(("facts", "line"), [
    ({}, "Linux x64"),
    ({"rocm": True, "vulkan": True}, "Linux x64, ROCm, Vulkan"),
    ({"cuda_runtime": 12}, "Linux x64, CUDA runtime 12"),
    ({"glibc": "2.39", "memory": 1 << 30}, "Linux x64"),
])
def test_describe(facts: dict[str, object], line: str) -> None:
    assert host.Host("linux", "x64", **facts).describe() == line  # type: ignore[arg-type]


def test_to_json_holds_every_fact() -> None:
    assert host.Host("linux", "x64", cuda_runtime=13).to_json() == {
        "os": "linux", "arch": "x64", "nvidia_driver": None, "cuda_runtime": 13, "rocm": False, "vulkan": False,
        "glibc": None, "memory": None}
    assert host.platform_string("macos", "arm64") == "macos-arm64"


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
