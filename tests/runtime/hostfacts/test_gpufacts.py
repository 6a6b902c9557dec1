"""GPU facts: NVIDIA capabilities, the CUDA runtime's version and reach, ROCm and Vulkan (issue 32, item 1).
The CUDA runtime is one set of facts (issue 44, item 5): the ``libcudart.so.<N>`` found on the loader's
paths (its cache too), its version (its file name's, else what it reports, asked in a child process
on this machine only) and the usable major, N only where its cuBLAS lies beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts import gpufacts, host
from superfluid.runtime.hostfacts.host import detect
from tests.runtime.fake_roots import X64, lay_out, write_ld_cache


def test_gfx_targets_are_named() -> None:
    assert [gpufacts.gfx_name(v) for v in (90010, 110000, 90402, 100300, 0)] == \
        ["gfx90a", "gfx1100", "gfx942", "gfx1030", None]


def test_nvidia_smi_csv_is_read() -> None:
    text = "compute_cap, driver_version\n6.1, 580.95.05\n8.6, 580.95.05\n"
    assert gpufacts.parse_nvidia_smi(text) == (("6.1", "8.6"), "580.95.05")
    assert gpufacts.parse_nvidia_smi("[N/A], [N/A]\n") == ((), None)


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for node, version in (("0", 0), ("1", 90010), ("2", 110000), ("3", 90010)):
        props = root / "sys/class/kfd/kfd/topology/nodes" / node
        props.mkdir(parents=True)
        (props / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\nsimd_count 4\n")
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.4.1-120\n")
    (root / "usr/share/vulkan/icd.d").mkdir(parents=True)
    (root / "usr/share/vulkan/icd.d/radeon_icd.x86_64.json").write_text("{}")
    (root / "usr/share/vulkan/icd.d/README").write_text("")
    lib = root / "usr/lib64"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12.4.127").write_bytes(b"")
    os.symlink("libcudart.so.12.4.127", lib / "libcudart.so.12")
    (root / "usr/local/cuda/lib64").mkdir(parents=True)
    (root / "usr/local/cuda/lib64/libcudart.so.13.0.48").write_bytes(b"")
    os.symlink("libcudart.so.13.0.48", root / "usr/local/cuda/lib64/libcudart.so.13")
    return root


def test_rocm_vulkan_and_the_cuda_runtime_are_read_under_a_root(tmp_path: Path) -> None:
    root = _root(tmp_path)
    host = detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_LIBRARY_PATH": "/usr/lib64"})
    assert host.rocm_version == "6.4.1" and host.rocm_gfx == ("gfx90a", "gfx1100")
    assert host.vulkan_icds == ("/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",)
    # the loader's runtime (12.4, reached) before the one only in /usr/local/cuda (13, not on its paths)
    assert (host.cuda_runtime_version, host.cuda_runtime_reachable) == ("12.4", True)
    off = detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_LIBRARY_PATH": "/usr/lib"})
    assert (off.cuda_runtime_version, off.cuda_runtime_reachable) == ("13.0", False)
    assert off.cuda_capabilities == ()  # a root named: this machine's GPUs are not asked
    doc = off.to_json()
    assert doc["rocm_gfx"] == ["gfx90a", "gfx1100"] and doc["cuda_runtime_reachable"] is False


def test_every_gpu_fact_is_overridden() -> None:
    host = detect({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05",
                   "SUPERFLUID_HOST_CUDA_CAPABILITY": "8.6,8.9", "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION": "12.4",
                   "SUPERFLUID_HOST_CUDA_RUNTIME_REACHABLE": "no", "SUPERFLUID_HOST_ROCM_VERSION": "7.0.2",
                   "SUPERFLUID_HOST_ROCM_GFX": "gfx90a,gfx1100"})
    assert host.cuda_capabilities == ("8.6", "8.9") and host.cuda_runtime == 12
    assert (host.cuda_runtime_version, host.cuda_runtime_reachable) == ("12.4", False)
    assert (host.rocm_version, host.rocm_gfx) == ("7.0.2", ("gfx90a", "gfx1100"))
    none = detect({"SUPERFLUID_HOST_CUDA_CAPABILITY": "none", "SUPERFLUID_HOST_ROCM_VERSION": "none",
                   "SUPERFLUID_HOST_ROCM_GFX": "none"})
    assert (none.cuda_capabilities, none.rocm_version, none.rocm_gfx) == ((), None, ())


def test_the_libcuda_probe_degrades_to_nothing_where_there_is_no_driver() -> None:
    done = subprocess.run([sys.executable, "-m", "superfluid.runtime.hostfacts.gpufacts"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() in ("{}",) or '"capabilities"' in done.stdout
    assert gpufacts.ask_cudart("/nonexistent/libcudart.so.12") is None


def test_a_library_without_the_symbols_is_not_called(tmp_path: Path) -> None:
    """A library by libcudart's name that lacks ``cudaRuntimeGetVersion`` is looked at, never called."""
    libc = detect({}).found("libc.so.6")
    if libc is None:
        pytest.skip("no libc.so.6 found on this machine")
    assert gpufacts.ask_cudart(libc) is None


def _asked(*args: object) -> None:
    raise AssertionError("a file of a test's root was asked in a process")


def test_a_runtime_of_a_named_root_is_never_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``libcudart.so.13`` whose name says no minor, under a test's root: found, reached through
    the loader's cache, version not known; neither loaded here nor in a child."""
    root = lay_out(tmp_path / "debian", "debian")
    cuda = root / "usr/local/cuda-13.0/lib"
    cuda.mkdir(parents=True)
    (cuda / "libcudart.so.13").write_bytes(b"\x7fELF hostile")
    write_ld_cache(root, [("libcudart.so.13", "/usr/local/cuda-13.0/lib/libcudart.so.13", X64)])
    monkeypatch.setattr(host, "ask_cudart", _asked)
    monkeypatch.setattr(host, "probe_cuda", _asked)
    h = detect({"SUPERFLUID_HOST_ROOT": str(root)})
    assert (h.cuda_runtime_path, h.cuda_runtime_reachable, h.cuda_runtime_version, h.cuda_runtime) == (
        "/usr/local/cuda-13.0/lib/libcudart.so.13", True, None, None)  # no libcublas.so.13 beside it: not usable
    (cuda / "libcublas.so.13").write_bytes(b"")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_MEMORY": "1G"})  # another answer than cached
    assert (h.cuda_runtime_path, h.cuda_runtime) == ("/usr/local/cuda-13.0/lib/libcudart.so.13", 13)


@pytest.mark.parametrize(("files", "path", "reachable", "major"), [
    pytest.param({"usr/lib64": ["libcudart.so.13"], "usr/local/cuda/lib64": ["libcudart.so.12", "libcublas.so.12"]},
                 "/usr/local/cuda/lib64/libcudart.so.12", False, 12, id="the-usable-one-before-the-reached-one"),
    pytest.param({"usr/lib64": ["libcudart.so.12", "libcublas.so.12", "libcudart.so.13"]},
                 "/lib64/libcudart.so.12", True, 12, id="the-newest-with-its-blas"),  # Fedora's loader: /lib64 first
    pytest.param({"usr/lib64": ["libcudart.so.13"]}, "/lib64/libcudart.so.13", True, None,
                 id="none-usable-but-named"),
    pytest.param({"usr/local/cuda/lib64": ["libcudart.so.12"], "usr/lib64": ["libcublas.so.12"]},
                 "/usr/local/cuda/lib64/libcudart.so.12", False, None, id="its-blas-elsewhere"),
])
def test_the_runtime_named_is_the_one_counted(tmp_path: Path, files: dict[str, list[str]], path: str,
                                              reachable: bool, major: int | None) -> None:
    """``cuda_runtime`` (the usable major) and ``cuda_runtime_path`` speak of the same library."""
    root = lay_out(tmp_path / "fedora", "fedora")
    for folder, names in files.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            (root / folder / name).write_bytes(b"")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root)})
    assert (h.cuda_runtime_path, h.cuda_runtime_reachable, h.cuda_runtime) == (path, reachable, major)


_RUNTIME_VERSION = """
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
v = ctypes.c_int(0)
assert rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0
print(f"{v.value // 1000}.{(v.value % 1000) // 10}")
"""


def test_this_machine_s_cuda_runtime_reports_its_version() -> None:
    """Where the loader reaches a ``libcudart.so.<N>`` (a CUDA toolkit's, in its cache), its version
    is what it reports (``cudaRuntimeGetVersion`` needs no driver), not null."""
    h = detect({})
    if not h.cuda_runtime_path or not h.cuda_runtime_reachable:
        pytest.skip("no libcudart on this machine's loader paths")
    said = subprocess.run([sys.executable, "-c", _RUNTIME_VERSION, h.cuda_runtime_path], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()
    assert h.cuda_runtime_version == said and said.split(".")[0] == h.cuda_runtime_path.rsplit(".so.", 1)[1]
    blas = os.path.join(os.path.dirname(h.cuda_runtime_path), f"libcublas.so.{said.split('.')[0]}")
    assert h.cuda_runtime == (int(said.split(".")[0]) if os.path.exists(blas) else None)
    assert gpufacts.ask_cudart(h.cuda_runtime_path) == said
