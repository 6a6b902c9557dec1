"""GPU facts of a Linux host: NVIDIA GPUs' compute capabilities, the CUDA runtime, ROCm and Vulkan.

See docs/install.md, "How a GPU build is chosen".
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from superfluid.runtime.hostfacts.factfiles import Unread, read_fact, under
from superfluid.runtime.hostfacts.libraries import version_key
from superfluid.runtime.kernel.jsonread import loads

# Every probe degrades to "not known" (None or empty), never raises: a fact not known refuses no
# build. The probe that calls into ``libcuda`` runs in a child process with a time limit (a driver
# that hangs or crashes costs the answer, not the command), and checks each symbol before calling it;
# so does the one asking a CUDA runtime its version, and only of this machine's own (never a file of a
# test's root).
# The overrides are in docs/cli.md, "Environment".
__all__ = ["CUDA_DIRS", "VULKAN_ICD_DIRS", "KFD_NODES", "ROCM_VERSION_FILE", "gfx_name", "parse_nvidia_smi",
           "rocm_version", "rocm_gfx", "vulkan_icds", "CudaRuntime", "cuda_runtime", "cudart_version_of",
           "ask_cudart", "probe_cuda", "probe_libcuda"]

#: where a CUDA toolkit or the distribution's packages put the CUDA runtime (not all on the loader's paths)
CUDA_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
             "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
#: where Vulkan's installable client drivers are described (one ``.json`` each)
VULKAN_ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
#: the kernel's topology of AMD GPUs (one folder per node; a GPU's has a non-zero gfx_target_version)
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
ROCM_VERSION_FILE = "/opt/rocm/.info/version"
_PROBE_TIMEOUT = 20.0  # seconds: cuInit on a busy host may take seconds, never minutes
_CUDART_TIMEOUT = 5.0  # seconds: cudaRuntimeGetVersion asks no driver
_FACT_MAX_BYTES = 65536  # bytes read of ROCm's version file and of a KFD node's properties
_CAPABILITY = re.compile(r"\d+\.\d+")
_CUDART = re.compile(r"libcudart\.so\.(\d+)$")
_CUBLAS = "libcublas.so.{}"
# CUdevice_attribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
_CC_MAJOR, _CC_MINOR = 75, 76


def gfx_name(target_version: int) -> str | None:
    """The gfx target of a KFD node's ``gfx_target_version`` (``90010`` -> ``gfx90a``, ``110000`` ->
    ``gfx1100``); None for 0 (a CPU node).

    >>> gfx_name(90010), gfx_name(110000), gfx_name(90402), gfx_name(0)
    ('gfx90a', 'gfx1100', 'gfx942', None)
    """
    if target_version <= 0:
        return None
    major, minor, step = target_version // 10000, (target_version // 100) % 100, target_version % 100
    return f"gfx{major}{minor:x}{step:x}"


def parse_nvidia_smi(text: str) -> tuple[tuple[str, ...], str | None]:
    """``(capabilities, driver)`` from ``nvidia-smi --query-gpu=compute_cap,driver_version --format=csv``."""
    caps: list[str] = []
    driver = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 2 and _CAPABILITY.fullmatch(cells[0]):
            caps.append(cells[0])
            driver = driver or (cells[1] if re.fullmatch(r"\d+(\.\d+)+", cells[1]) else None)
    return tuple(caps), driver


def _text(root: str, path: str, fact: str, unread: list[Unread] | None) -> str | None:
    data = read_fact(root, path, fact, unread, max_bytes=_FACT_MAX_BYTES, head=True)
    return data.decode("utf-8", "replace") if data is not None else None


def rocm_version(root: str, unread: list[Unread] | None = None) -> str | None:
    """ROCm's version as ``/opt/rocm/.info/version`` states it (``6.4.1-120`` -> ``6.4.1``), or None
    (a file there that cannot be read goes to ``unread``)."""
    text = _text(root, ROCM_VERSION_FILE, "rocm_version", unread)
    m = re.match(r"\s*(\d+(?:\.\d+)*)", text or "")
    return m.group(1) if m else None


def rocm_gfx(root: str, unread: list[Unread] | None = None) -> tuple[str, ...]:
    """The gfx target of each AMD GPU the kernel's KFD topology lists, each once, in node order (a
    node's ``properties`` that cannot be read goes to ``unread``)."""
    try:
        nodes = sorted(os.listdir(under(root, KFD_NODES)), key=lambda n: (len(n), n))
    except OSError:
        return ()
    out: dict[str, None] = {}
    for node in nodes:
        text = _text(root, f"{KFD_NODES}/{node}/properties", "rocm_gfx", unread) or ""
        m = re.search(r"^gfx_target_version\s+(\d+)\s*$", text, re.MULTILINE)
        name = gfx_name(int(m.group(1))) if m else None
        if name:
            out[name] = None
    return tuple(out)


def vulkan_icds(root: str) -> tuple[str, ...]:
    """The ICD files (``/usr/share/vulkan/icd.d/nvidia_icd.json``...) of Vulkan's drivers, host paths."""
    out = []
    for folder in VULKAN_ICD_DIRS:
        try:
            names = sorted(os.listdir(under(root, folder)))
        except OSError:
            continue
        out += [f"{folder}/{n}" for n in names if n.endswith(".json")]
    return tuple(out)


def cudart_version_of(path: str) -> str | None:
    """``major.minor`` of a CUDA runtime from the name its soname links to (``libcudart.so.12.4.127``)."""
    m = re.search(r"libcudart\.so\.(\d+)\.(\d+)", os.path.basename(os.path.realpath(path)))
    return f"{m.group(1)}.{m.group(2)}" if m else None


class CudaRuntime(NamedTuple):
    """The CUDA runtime found (``libcudart.so.<N>``, a host path), whether the loader's paths reach it
    (None: not known), and ``major``: N when its cuBLAS (``libcublas.so.<N>``) lies beside it, which
    is what a CUDA build of llama.cpp loads with it; None when it does not (the runtime is then named,
    not counted)."""

    path: str | None = None
    reachable: bool | None = None
    major: int | None = None


def cuda_runtime(root: str, libraries: Mapping[str, str] | None, dirs: Sequence[str] = CUDA_DIRS) -> CudaRuntime:
    """The CUDA runtime of a host whose loader finds ``libraries`` (None: not probed; nothing is
    found): of the runtimes the loader finds (reachable) and then those that only lie in a CUDA
    folder ``dirs`` (not reachable), each newest major first, the first with its cuBLAS beside it,
    else the first."""
    if libraries is None:
        return CudaRuntime()
    on_path = sorted(((int(m.group(1)), p) for n, p in libraries.items() if (m := _CUDART.match(n))), reverse=True)
    beside: list[tuple[int, str]] = []
    for folder in dirs:
        try:
            names = os.listdir(under(root, folder))
        except OSError:
            continue
        beside += [(int(m.group(1)), f"{folder}/{n}") for n in names if (m := _CUDART.match(n))]
    found = [(major, path, True) for major, path in on_path] + \
        [(major, path, False) for major, path in sorted(beside, reverse=True)]
    for major, path, reachable in found:
        if os.path.exists(under(root, os.path.join(os.path.dirname(path), _CUBLAS.format(major)))):
            return CudaRuntime(path, reachable, major)
    return CudaRuntime(found[0][1], found[0][2], None) if found else CudaRuntime()


def probe_libcuda() -> dict[str, object]:
    """What the NVIDIA driver's ``libcuda.so.1`` says of this machine's GPUs, in this process:
    ``{"driver_api": "12.8", "capabilities": ["8.6"], "names": ["NVIDIA GeForce RTX 3090"]}``;
    ``{}`` when it cannot be loaded or any symbol is missing or a call fails."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {}
    names = ("cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetAttribute",
             "cuDeviceGetName")
    if not all(hasattr(cuda, n) for n in names):
        return {}
    version, count = ctypes.c_int(0), ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDriverGetVersion(ctypes.byref(version)) != 0 \
            or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return {}
    caps, gpus = [], []
    for i in range(count.value):
        dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        name = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGet(ctypes.byref(dev), i) != 0 \
                or cuda.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, dev) != 0 \
                or cuda.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, dev) != 0:
            return {}
        caps.append(f"{major.value}.{minor.value}")
        gpus.append(name.value.decode("utf-8", "replace") if cuda.cuDeviceGetName(name, 256, dev) == 0 else "")
    v = version.value
    return {"driver_api": f"{v // 1000}.{(v % 1000) // 10}", "capabilities": caps, "names": gpus}


#: what a CUDA runtime reports of itself (``cudaRuntimeGetVersion``, which needs no driver), asked by a
#: child Python of the standard library alone (``-I -S``: none of this package's imports, a fifth of
#: the time): the library at ``argv[1]`` loaded, the symbol looked up before it is called; exit 1 when
#: it cannot be loaded, lacks the symbol or fails
_ASK_CUDART = """
import ctypes, sys
try:
    ask = ctypes.CDLL(sys.argv[1]).cudaRuntimeGetVersion
except (OSError, AttributeError):
    raise SystemExit(1)
v = ctypes.c_int(0)
if ask(ctypes.byref(v)) != 0 or v.value <= 0:
    raise SystemExit(1)
print(f"{v.value // 1000}.{v.value % 1000 // 10}")
"""


def _child() -> dict[str, object]:
    """This module's ``main`` in a child process (a hanging or crashing driver costs only the answer)."""
    try:
        done = subprocess.run([sys.executable, "-m", "superfluid.runtime.hostfacts.gpufacts"],
                              capture_output=True, text=True, timeout=_PROBE_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
        doc = loads(done.stdout, max_bytes=65536) if done.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _on_path(name: str) -> str | None:
    """The executable ``name`` in the folders of ``PATH`` (``shutil.which``'s answer, without the
    archive libraries ``shutil`` imports on every computed ``runtimes``)."""
    for folder in os.get_exec_path():
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _nvidia_smi() -> tuple[tuple[str, ...], str | None]:
    tool = _on_path("nvidia-smi")
    if tool is None:
        return (), None
    try:
        done = subprocess.run([tool, "--query-gpu=compute_cap,driver_version", "--format=csv"], capture_output=True,
                              text=True, timeout=_PROBE_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return (), None
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else ((), None)


def probe_cuda() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(capabilities, names)`` of this machine's NVIDIA GPUs: through ``libcuda`` (in a child
    process), else ``nvidia-smi`` (no names)."""
    doc = _child()
    listed, named = doc.get("capabilities"), doc.get("names")
    caps = tuple(c for c in listed if isinstance(c, str) and _CAPABILITY.fullmatch(c)) \
        if isinstance(listed, list) else ()
    names = tuple(str(n) for n in named) if isinstance(named, list) else ()
    if not caps:
        caps, _ = _nvidia_smi()
        names = ()
    return caps, names if len(names) == len(caps) else ()


def ask_cudart(cudart: str) -> str | None:
    """``major.minor`` the CUDA runtime at ``cudart`` (this machine's own) reports, asked in a child
    process (``_ASK_CUDART``: a runtime that hangs or crashes costs only the answer); None when it
    does not say."""
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _ASK_CUDART, cudart], capture_output=True,
                              text=True, timeout=_CUDART_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    said = done.stdout.strip()
    return said if done.returncode == 0 and version_key(said) is not None else None


def main(argv: Sequence[str]) -> int:
    """``python -m superfluid.runtime.hostfacts.gpufacts``: the libcuda probe as JSON."""
    sys.stdout.write(json.dumps(probe_libcuda()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
