"""``runtime/host``: the host's facts, each overridden by its ``SUPERFLUID_HOST_*`` variable, and how
they are found under a root laid out as Debian, Fedora, Arch and Alpine lay out their libraries
(``tests/runtime/fake_roots.py``): the C library and libstdc++'s versions, the library directories,
the CUDA runtime, Vulkan and the CPU's features."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts import host
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.hostfacts.overrides import TABLE
from superfluid.runtime.kernel.errors import UsageError
from tests.runtime.fake_roots import cpuinfo, lay_out, real_library


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


@pytest.mark.parametrize(("value", "rocm"), [("1", True), ("yes", True), ("true", True), ("0", False),
                                           ("none", False), ("No", False), ("FALSE", False)])
def test_a_flag_override_is_a_yes_or_a_no(value: str, rocm: bool) -> None:
    assert detect({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ROCM": value}).rocm is rocm


@pytest.mark.parametrize("value", ["nan", "2", "maybe", "-5"])
def test_a_flag_override_that_is_neither_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match="SUPERFLUID_HOST_ROCM is .*, not yes or no"):
        detect({"SUPERFLUID_HOST_ROCM": value})


def test_an_empty_override_is_unset() -> None:
    """Empty means unset, for every variable (as SUPERFLUID_HOME's): the fact is probed."""
    probed = detect({})
    empty = detect(dict.fromkeys(TABLE, "") | {"SUPERFLUID_HOST_FUTURE": ""})
    assert empty == probed and empty.memory == probed.memory and empty.glibc == probed.glibc


def test_a_rocm_version_implies_rocm() -> None:
    """Issue 42, item 15: a version implies its stack, as the CUDA runtime's version does."""
    h = detect({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ROCM_VERSION": "10.1",
                "SUPERFLUID_HOST_ROCM_GFX": "gfx1100"})
    assert (h.rocm, h.rocm_version, h.rocm_gfx) == (True, "10.1", ("gfx1100",))
    assert detect({"SUPERFLUID_HOST_ROCM_VERSION": "none"}).rocm is False
    assert detect({"SUPERFLUID_HOST_ROCM_VERSION": "none", "SUPERFLUID_HOST_ROCM": "yes"}).rocm is True


def test_an_override_outside_its_form_is_refused_naming_it() -> None:
    """Issue 42, items 1 and 14: never a ValueError, never a value taken as another."""
    for name, value in (("SUPERFLUID_HOST_MEMORY", "nan"), ("SUPERFLUID_HOST_MEMORY", "-5"),
                        ("SUPERFLUID_HOST_NVIDIA_DRIVER", "abc"), ("SUPERFLUID_HOST_GLIBC", "abc"),
                        ("SUPERFLUID_HOST_OS", "-5"), ("SUPERFLUID_HOST_CUDA_RUNTIME", "1e309")):
        with pytest.raises(UsageError, match=f"^{name} is "):
            detect({name: value})


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
    assert host.Host(os="linux", arch="x64", **facts).describe() == line  # type: ignore[arg-type]


def test_to_json_holds_every_fact() -> None:
    assert host.Host(os="linux", arch="x64", cuda_runtime=13).to_json() == {
        "os": "linux", "arch": "x64", "nvidia_driver": None, "cuda_runtime": 13, "rocm": False, "vulkan": False,
        "glibc": None, "memory": None, "libc": None, "glibcxx": None, "cxxabi": None, "library_dirs": [],
        "cpu_features": [], "libraries": None, "cuda_capabilities": [], "gpu_names": [],
        "cuda_runtime_path": None, "cuda_runtime_version": None, "cuda_runtime_reachable": None,
        "rocm_version": None, "rocm_gfx": [], "vulkan_icds": [], "distribution": None, "kernel": None,
        "x86_64_level": None, "unread": [], "set_by": {}}
    found = host.Host(os="linux", arch="x64", libraries={"libvulkan.so.1": "/usr/lib64/libvulkan.so.1",
                                                         "libz.so.1": "/x"})
    assert found.to_json()["libraries"] == {"libvulkan.so.1": "/usr/lib64/libvulkan.so.1", "libcuda.so.1": None,
                                            "libstdc++.so.6": None, "libgomp.so.1": None}
    assert found.found("libz.so.1") == "/x" and found.found("libnope.so") is None
    assert found == host.Host(os="linux", arch="x64")  # the libraries found are not compared: the facts are
    assert host.platform_string("macos", "arm64") == "macos-arm64"


def _root(tmp_path: Path, distro: str, **env: str) -> host.Host:
    root = lay_out(tmp_path / distro, distro)
    return detect({"SUPERFLUID_HOST_ROOT": str(root), **env})


GLIBCXX = detect({}).glibcxx  # this machine's libstdc++, linked into every fake root


@pytest.mark.parametrize(("distro", "libc", "dirs", "vulkan"), [
    pytest.param("debian", "glibc", ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"], False,
                 id="debian"),
    pytest.param("fedora", "glibc", ["/lib64", "/usr/lib64"], True, id="fedora-usr-lib64"),
    pytest.param("arch", "glibc", ["/usr/lib"], True, id="arch-usr-lib"),
    pytest.param("alpine", "musl", ["/lib", "/usr/lib"], False, id="alpine-musl"),  # musl: no /usr/local/lib here
])
def test_each_distribution_s_layout_is_read(tmp_path: Path, distro: str, libc: str, dirs: list[str],
                                             vulkan: bool) -> None:
    """The folders are each loader's own (issue 44, item 5: what ``ld.so --help`` prints): no
    /lib64, /usr/lib64 or /usr/local/lib where the loader does not search them."""
    h = _root(tmp_path, distro)
    assert (h.libc, h.vulkan) == (libc, vulkan)
    assert list(h.library_dirs) == dirs
    assert h.glibcxx == GLIBCXX and h.glibcxx is not None and h.cxxabi is not None  # read from libstdc++'s ELF
    # glibc: read from the libc.so.6 found (its newest GLIBC_ definition); musl has none
    assert h.glibc == (None if libc == "musl" else detect({}).glibc)
    assert h.cpu_features == ("avx", "avx2", "f16c", "fma")


def test_fedora_finds_its_vulkan_loader_in_usr_lib64(tmp_path: Path) -> None:
    h = _root(tmp_path, "fedora")
    assert h.found("libvulkan.so.1") == "/lib64/libvulkan.so.1" and h.vulkan
    assert h.describe() == "Linux x64, Vulkan"


def test_vulkan_needs_its_driver_too(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "fedora", "fedora")
    for icd in (root / "usr" / "share" / "vulkan" / "icd.d").iterdir():
        icd.rename(icd.with_suffix(".txt"))
    assert detect({"SUPERFLUID_HOST_ROOT": str(root)}).vulkan is False


def test_arch_finds_libcuda(tmp_path: Path) -> None:
    assert _root(tmp_path, "arch").found("libcuda.so.1") == "/usr/lib/libcuda.so.1"  # Arch's loader: /usr/lib


def test_ld_library_path_comes_first(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "debian", "debian")
    (root / "opt" / "vk").mkdir(parents=True)
    (root / "opt" / "vk" / "libvulkan.so.1").write_bytes(b"")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root), "LD_LIBRARY_PATH": "/opt/vk:relative:/absent"})
    assert h.library_dirs[0] == "/opt/vk" and h.found("libvulkan.so.1") == "/opt/vk/libvulkan.so.1"


def test_library_path_override_replaces_the_probed_folders(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "fedora", "fedora")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_LIBRARY_PATH": "/usr/lib64:/absent"})
    assert h.library_dirs == ("/usr/lib64",) and h.found("libvulkan.so.1") == "/usr/lib64/libvulkan.so.1"


def test_the_real_host_reads_the_loader_s_cache() -> None:
    h = detect({})
    if h.os != "linux" or h.libc != "glibc":
        pytest.skip("a glibc Linux host reads ldconfig -p")
    assert h.found("libc.so.6") is not None and os.path.samefile(h.found("libc.so.6") or "", real_library("libc.so.6"))
    assert h.glibc is not None and h.glibcxx is not None and h.library_dirs


@pytest.mark.parametrize(("env", "facts"), [
    pytest.param({"SUPERFLUID_HOST_LIBC": "musl"}, ("musl", None), id="libc-musl"),
    pytest.param({"SUPERFLUID_HOST_LIBC": "none"}, (None, None), id="libc-unknown"),
    pytest.param({"SUPERFLUID_HOST_GLIBC": "2.28"}, ("glibc", "2.28"), id="glibc-implies-glibc"),
    pytest.param({"SUPERFLUID_HOST_GLIBC": "none"}, (None, None), id="glibc-none"),
])
def test_the_c_library_overrides(tmp_path: Path, env: dict[str, str], facts: tuple[str | None, str | None]) -> None:
    h = _root(tmp_path, "debian", **env)
    assert (h.libc, h.glibc) == facts


def test_libstdcxx_and_cpu_overrides(tmp_path: Path) -> None:
    h = _root(tmp_path, "debian", SUPERFLUID_HOST_GLIBCXX="3.4.28", SUPERFLUID_HOST_CXXABI="none",
              SUPERFLUID_HOST_CPU_FEATURES="avx, avx2 fma")
    assert (h.glibcxx, h.cxxabi, h.cpu_features) == ("3.4.28", None, ("avx", "avx2", "fma"))


def test_arm64_reads_its_hwcaps(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "debian", "debian", arch="arm64")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_ARCH": "arm64"})
    assert h.cpu_features == ("fp", "asimd", "asimdhp", "asimddp")
    assert "Features" in cpuinfo("arm64")


def test_another_platform_named_is_not_this_machine() -> None:
    """SUPERFLUID_HOST_ARCH naming another architecture describes a host: this machine's C library
    and libraries are not its facts, and refuse nothing."""
    other = "arm64" if detect({}).arch == "x64" else "x64"
    h = detect({"SUPERFLUID_HOST_ARCH": other})
    assert (h.libc, h.glibc, h.glibcxx, h.libraries, h.library_dirs, h.cpu_features) == (None, None, None, None, (), ())


def _touch(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")


@pytest.mark.parametrize(("files", "expected"), [
    ({"usr/local/cuda/lib64": ["libcudart.so.12", "libcublas.so.12"]}, 12),
    ({"usr/local/cuda/lib64": ["libcudart.so.12.4.127", "libcublas.so.12.4.5.8", "libcudart.so.13",
                               "libcublas.so.13"]}, 13),
    ({"usr/local/cuda/lib64": ["libcudart.so.13"], "usr/lib64": ["libcublas.so.13"]}, None),  # one folder
    ({"usr/local/cuda/lib64": ["libcudart.so.12", "libcublas.so.11"]}, None),  # one major for both
    ({"usr/local/cuda/lib64": ["libcudart.so", "libcublas.so", "libcudart.so.x", "libcublas.so.x"]}, None),
    ({"usr/local/cuda/lib64": ["libcudart.so.11", "libcublas.so.11"], "usr/lib64": ["libcudart.so.13",
                                                                                    "libcublas.so.13"]}, 13),
    ({"usr/lib64": ["libcudart.so.12", "libcublas.so.12"]}, 12),  # Fedora/RHEL's folder: was missed
    ({}, None),
])
def test_the_cuda_runtime_is_the_newest_major_with_its_blas(tmp_path: Path, files: dict[str, list[str]],
                                                             expected: int | None) -> None:
    root = lay_out(tmp_path / "fedora", "fedora")
    for folder, names in files.items():
        _touch(root / folder, *names)
    assert detect({"SUPERFLUID_HOST_ROOT": str(root)}).cuda_runtime == expected


@pytest.mark.parametrize(("loader", "icd", "expected"), [
    ("usr/lib/x86_64-linux-gnu/libvulkan.so.1", "intel_icd.x86_64.json", True),
    ("usr/lib/libvulkan.so.1", "lvp_icd.json", True),
    ("usr/lib/x86_64-linux-gnu/libvulkan.so.1", None, False),  # no driver
    (None, "intel_icd.x86_64.json", False),  # no loader
    ("usr/lib/x86_64-linux-gnu/libvulkan.so.1.3.239", "intel_icd.x86_64.json", False),  # not the name opened
    ("usr/lib/x86_64-linux-gnu/libvulkan.so.1", "README.txt", False),
    ("opt/elsewhere/libvulkan.so.1", "intel_icd.x86_64.json", False),  # on no library path
])
def test_vulkan_needs_its_loader_and_a_driver(tmp_path: Path, loader: str | None, icd: str | None,
                                              expected: bool) -> None:
    root = lay_out(tmp_path / "debian", "debian")
    if loader:
        _touch(root / os.path.dirname(loader), os.path.basename(loader))
    if icd:
        _touch(root / "etc" / "vulkan" / "icd.d", icd)
    assert detect({"SUPERFLUID_HOST_ROOT": str(root)}).vulkan is expected

