"""Host facts: platform, accelerators, C library, libraries and CPU, each overridable by ``SUPERFLUID_HOST_*``.

See docs/cli.md, "Environment", and docs/install.md, "What a build needs".
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from superfluid.runtime.hostfacts.gpufacts import (
    CUDA_DIRS,
    VULKAN_ICD_DIRS,
    cudart_on_host,
    cudart_version_of,
    parse_capabilities,
    parse_gfx,
    probe_cuda,
    rocm_gfx,
    rocm_version,
    vulkan_icds,
)
from superfluid.runtime.hostfacts.libraries import (
    glibc_defined,
    ldconfig,
    libc_of,
    libraries_in,
    library_dirs,
    libstdcxx_versions,
    under,
)
from superfluid.runtime.hostfacts.system import arch_name, os_name, running_arch, running_os
from superfluid.runtime.kernel.lookup import is_host_variable

__all__ = ["Host", "detect", "platform_string", "PROBED", "X86_FEATURES", "ARM64_HWCAPS", "NOTABLE"]

_NONE = ("none", "no", "false", "0", "")

#: the x86 CPU features a build may need (``/proc/cpuinfo``'s ``flags``)
X86_FEATURES = ("avx", "avx2", "avx512f", "f16c", "fma")
#: the arm64 HWCAPs a build may need (``/proc/cpuinfo``'s ``Features``, the kernel's names of AT_HWCAP bits)
ARM64_HWCAPS = ("fp", "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme")
#: the libraries a report names where they were found: the Vulkan loader, the NVIDIA driver's CUDA
#: library, the C++ and OpenMP runtimes builds link
NOTABLE = ("libvulkan.so.1", "libcuda.so.1", "libstdc++.so.6", "libgomp.so.1")


@dataclass(kw_only=True, frozen=True, slots=True)
class Host:
    """What the resolver and planners need to know about this machine.

    ``libc`` is ``"glibc"``, ``"musl"`` or None (not known: a host described rather than probed);
    ``glibcxx`` and ``cxxabi`` the newest versions the host's ``libstdc++.so.6`` defines;
    ``libraries`` each library name found on the loader's paths and where (None: not probed, so no
    library is judged missing); ``cpu_features`` those of ``X86_FEATURES``/``ARM64_HWCAPS`` the CPU
    has (empty: not known).
    """

    os: str  # "linux" | "macos"
    arch: str  # "x64" | "arm64"
    nvidia_driver: str | None = None
    cuda_runtime: int | None = None
    rocm: bool = False
    vulkan: bool = False
    glibc: str | None = None
    memory: int | None = None  # bytes of physical memory
    libc: str | None = None
    glibcxx: str | None = None
    cxxabi: str | None = None
    library_dirs: tuple[str, ...] = ()
    cpu_features: tuple[str, ...] = ()
    libraries: Mapping[str, str] | None = field(default=None, compare=False, repr=False)
    cuda_capabilities: tuple[str, ...] = ()  # one "major.minor" per NVIDIA GPU; empty: not known
    gpu_names: tuple[str, ...] = ()  # the GPUs' names, in the same order, when the driver said them
    cuda_runtime_version: str | None = None  # "12.4": what the found libcudart reports
    cuda_runtime_reachable: bool | None = None  # whether the loader's paths reach it (None: not known)
    rocm_version: str | None = None  # "6.4.1", from /opt/rocm/.info/version
    rocm_gfx: tuple[str, ...] = ()  # each AMD GPU's gfx target (KFD topology); empty: not known
    vulkan_icds: tuple[str, ...] = ()  # the ICD files of Vulkan's drivers

    @property
    def platform(self) -> str:
        """``<os>-<arch>``, e.g. ``linux-x64``."""
        return f"{self.os}-{self.arch}"

    def describe(self) -> str:
        """One line for people: ``Linux x64, NVIDIA driver 580.95.05, Vulkan``."""
        parts = [("macOS" if self.os == "macos" else "Linux") + " " + self.arch]
        if self.nvidia_driver:
            parts.append(f"NVIDIA driver {self.nvidia_driver}")
        if self.cuda_runtime:
            parts.append(f"CUDA runtime {self.cuda_runtime}")
        if self.rocm:
            parts.append("ROCm")
        if self.vulkan:
            parts.append("Vulkan")
        return ", ".join(parts)

    def found(self, name: str) -> str | None:
        """Where the library ``name`` (``libvulkan.so.1``) was found, or None."""
        return (self.libraries or {}).get(name)

    def to_json(self) -> dict[str, Any]:
        """Every fact; of the libraries, where each of ``NOTABLE`` was found (null: not found)."""
        return {"os": self.os, "arch": self.arch, "nvidia_driver": self.nvidia_driver,
                "cuda_runtime": self.cuda_runtime, "rocm": self.rocm, "vulkan": self.vulkan, "glibc": self.glibc,
                "memory": self.memory, "libc": self.libc, "glibcxx": self.glibcxx, "cxxabi": self.cxxabi,
                "library_dirs": list(self.library_dirs), "cpu_features": list(self.cpu_features),
                "libraries": {n: self.found(n) for n in NOTABLE} if self.libraries is not None else None,
                "cuda_capabilities": list(self.cuda_capabilities), "gpu_names": list(self.gpu_names),
                "cuda_runtime_version": self.cuda_runtime_version,
                "cuda_runtime_reachable": self.cuda_runtime_reachable, "rocm_version": self.rocm_version,
                "rocm_gfx": list(self.rocm_gfx), "vulkan_icds": list(self.vulkan_icds)}


def platform_string(os_name: str, arch: str) -> str:
    return f"{os_name}-{arch}"


def _env(overrides: Mapping[str, str], name: str) -> str | None:
    """The host-fact override ``name``; None when unset or empty."""
    value = overrides.get(name)
    return value if value else None


_NVIDIA_VERSION = "/proc/driver/nvidia/version"
_CUDA_DIRS = CUDA_DIRS
_VULKAN_ICD_DIRS = VULKAN_ICD_DIRS
_KFD, _ROCM, _CPUINFO = "/dev/kfd", "/opt/rocm", "/proc/cpuinfo"
#: what the probes below read: a file or directory whose change (a driver, a CUDA runtime, ROCm,
#: Vulkan or a library installed or removed) may change a fact; for keepers of answers computed
#: from the facts
PROBED: tuple[str, ...] = (_NVIDIA_VERSION, *_CUDA_DIRS, _KFD, _ROCM, "/etc/ld.so.cache", "/lib64", "/usr/lib64",
                           "/lib", "/usr/lib", "/usr/local/lib", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                           *_VULKAN_ICD_DIRS)


def _nvidia_driver(root: str) -> str | None:
    try:
        with open(under(root, _NVIDIA_VERSION), encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return None
    for token in first.split():
        if re.fullmatch(r"\d+(\.\d+)+", token):
            return token
    return None


def _names(folder: str) -> list[str]:
    """The names in ``folder`` (none when it cannot be listed): each folder is listed once."""
    try:
        return os.listdir(folder)
    except OSError:
        return []


_CUDA_SONAME = re.compile(r"(libcudart|libcublas)\.so\.(\d+)")


def _cuda_runtime(root: str, dirs: tuple[str, ...] = ()) -> int | None:
    """The newest CUDA major whose runtime (``libcudart.so.<N>``) and cuBLAS (``libcublas.so.<N>``)
    sit in the same one of the CUDA folders or the library folders ``dirs``."""
    majors: set[int] = set()
    for d in dict.fromkeys((*_CUDA_DIRS, *dirs)):
        found: dict[str, set[int]] = {"libcudart": set(), "libcublas": set()}
        for name in _names(under(root, d)):
            if m := _CUDA_SONAME.match(name):
                found[m.group(1)].add(int(m.group(2)))
        majors |= found["libcudart"] & found["libcublas"]
    return max(majors) if majors else None


def _rocm(root: str) -> bool:
    return os.path.exists(under(root, _KFD)) and os.path.isdir(under(root, _ROCM))


def _vulkan(root: str, libraries: Mapping[str, str]) -> bool:
    """A Vulkan loader by the name programs open it (``libvulkan.so.1``, on the loader's paths) and an
    installable client driver (a ``.json`` in an ICD folder)."""
    return "libvulkan.so.1" in libraries and any(
        n.endswith(".json") for d in _VULKAN_ICD_DIRS for n in _names(under(root, d)))


def _glibc() -> str | None:
    try:  # "glibc 2.36"
        stated = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        stated = None
    # confstr is how glibc says it (platform.libc_ver() asks it first, then reads the interpreter's
    # bytes); where it has no answer the libc is not glibc, or the loader's own files say which
    parts = (stated or "").split(maxsplit=1)
    name, version = parts if len(parts) == 2 else ("", "")
    return version if name == "glibc" and version else None


def _cpu_features(root: str, arch: str) -> tuple[str, ...]:
    """Those of ``X86_FEATURES`` (the ``flags`` line) or ``ARM64_HWCAPS`` (the ``Features`` line) that
    the first processor ``/proc/cpuinfo`` describes has."""
    key, known = ("flags", X86_FEATURES) if arch == "x64" else ("Features", ARM64_HWCAPS)
    try:
        with open(under(root, _CPUINFO), encoding="utf-8", errors="replace") as f:
            for line in f:
                name, sep, value = line.partition(":")
                if sep and name.strip() == key:
                    words = set(value.split())
                    return tuple(k for k in known if k in words)
    except OSError:
        pass
    return ()


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _flag(value: str) -> bool:
    return value.lower() not in _NONE


def _words(value: str) -> tuple[str, ...]:
    return tuple(w for w in re.split(r"[\s,]+", value.strip().lower()) if w and w not in _NONE)


def detect(environ: Mapping[str, str] | None = None) -> Host:
    """The running host's facts, each overridden by its ``SUPERFLUID_HOST_*`` variable when set
    (``LD_LIBRARY_PATH`` is read too: the loader searches it first). The probes read their files
    under ``/``, or under ``SUPERFLUID_HOST_ROOT`` (a test's fake root laid out as a distribution
    lays out its libraries); ``runtime/hostfacts/libraries.py`` finds the libraries and reads the C and C++
    libraries' versions."""
    env = os.environ if environ is None else environ
    return _detect(tuple(sorted((k, v) for k, v in env.items() if is_host_variable(k))))


class _Libraries(NamedTuple):
    """What the library probes found: the C library, libstdc++'s versions, the folders and names."""

    libc: str | None = None
    glibc: str | None = None
    glibcxx: str | None = None
    cxxabi: str | None = None
    dirs: tuple[str, ...] = ()
    found: Mapping[str, str] | None = None


def _libraries(env: Mapping[str, str], root: str, arch: str, native: bool) -> _Libraries:
    """The library facts of a Linux host: probed under ``root`` when it is this machine (``native``:
    its platform is the one it runs on, or a root is named), else only what ``env`` states."""
    named = env.get("SUPERFLUID_HOST_LIBRARY_PATH")
    if not native and named is None:
        return _Libraries()
    if named is not None:
        cached: list[tuple[str, str]] = []
        dirs = tuple(d for d in named.split(os.pathsep) if d.startswith("/") and os.path.isdir(under(root, d)))
    else:
        cached = ldconfig(root)
        dirs = library_dirs(root, arch, env.get("LD_LIBRARY_PATH"), cached)
    found = libraries_in(root, dirs, cached)
    stated = _glibc() if root == "/" else glibc_defined(root, found)
    glibcxx, cxxabi = libstdcxx_versions(root, found)
    return _Libraries(libc_of(root, found, stated), stated, glibcxx, cxxabi, dirs, found)


def _text(env: Mapping[str, str], name: str, probed: str | None) -> str | None:
    value = env.get(name)
    return probed if value is None else (None if value.lower() in _NONE else value)


class _Gpu(NamedTuple):
    """The GPU facts beyond the driver's version: each NVIDIA GPU's capability (and name), the CUDA
    runtime's version and reach, ROCm's version and gfx targets, Vulkan's ICD files."""

    capabilities: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    cudart_version: str | None = None
    cudart_reachable: bool | None = None
    rocm_version: str | None = None
    rocm_gfx: tuple[str, ...] = ()
    icds: tuple[str, ...] = ()


def _gpu(env: Mapping[str, str], root: str, linux: bool, native: bool, driver: str | None,
         libraries: Mapping[str, str] | None) -> _Gpu:
    """The GPU facts (``gpufacts``), each overridden by its variable. Only this machine's own GPUs
    are asked (``libcuda`` in a child process, else ``nvidia-smi``): not under a named root, nor for
    a host whose driver or capabilities are stated."""
    if not linux:
        return _Gpu()
    caps_set = env.get("SUPERFLUID_HOST_CUDA_CAPABILITY")
    rt_set = env.get("SUPERFLUID_HOST_CUDA_RUNTIME")
    rt_version = env.get("SUPERFLUID_HOST_CUDA_RUNTIME_VERSION")
    reach = env.get("SUPERFLUID_HOST_CUDA_RUNTIME_REACHABLE")
    path, reachable = (None, None) if rt_set is not None or rt_version is not None else cudart_on_host(root, libraries)
    version = cudart_version_of(under(root, path)) if path else None
    caps: tuple[str, ...] = parse_capabilities(caps_set) if caps_set is not None else ()
    names: tuple[str, ...] = ()
    ask = (caps_set is None and driver is not None and root == "/" and native
           and "SUPERFLUID_HOST_NVIDIA_DRIVER" not in env)
    if ask:
        caps, names, asked = probe_cuda(path if path and version is None else None)
        version = version or asked
    if rt_version is not None:
        version = rt_version if rt_version.lower() not in _NONE else None
    rocm_v = env.get("SUPERFLUID_HOST_ROCM_VERSION")
    gfx = env.get("SUPERFLUID_HOST_ROCM_GFX")
    return _Gpu(
        capabilities=caps,
        names=names,
        cudart_version=version,
        cudart_reachable=_flag(reach) if reach is not None else reachable,
        rocm_version=(None if rocm_v.lower() in _NONE else rocm_v) if rocm_v is not None else rocm_version(root),
        rocm_gfx=parse_gfx(gfx) if gfx is not None else rocm_gfx(root),
        icds=vulkan_icds(root),
    )


def _cuda_major(stated: str | None, version: str | None) -> int | None:
    """``SUPERFLUID_HOST_CUDA_RUNTIME`` (a major, or none), else the major of the runtime version stated."""
    if stated is not None:
        return None if stated.lower() in _NONE else int(stated)
    m = re.match(r"(\d+)", version or "")
    return int(m.group(1)) if m and version and version.lower() not in _NONE else None


@lru_cache(maxsize=8)
def _detect(overrides: tuple[tuple[str, str], ...]) -> Host:
    env = dict(overrides)
    system, arch = os_name(env), arch_name(env)
    root = _env(env, "SUPERFLUID_HOST_ROOT") or "/"
    driver = env.get("SUPERFLUID_HOST_NVIDIA_DRIVER")
    cuda = env.get("SUPERFLUID_HOST_CUDA_RUNTIME")
    rocm = env.get("SUPERFLUID_HOST_ROCM")
    vulkan = env.get("SUPERFLUID_HOST_VULKAN")
    glibc = env.get("SUPERFLUID_HOST_GLIBC")
    memory = env.get("SUPERFLUID_HOST_MEMORY")
    features = env.get("SUPERFLUID_HOST_CPU_FEATURES")
    linux = system == "linux"
    # a platform other than the one this runs on is a host described, not this machine: its C
    # library and libraries are not this machine's (a root named is read as that host's)
    native = root != "/" or (system, arch) == (running_os(), running_arch())
    libs = _libraries(env, root, arch, native) if linux else _Libraries()
    libc = _text(env, "SUPERFLUID_HOST_LIBC", libs.libc)
    if glibc is not None and env.get("SUPERFLUID_HOST_LIBC") is None:
        libc = "glibc" if glibc else libs.libc if libs.libc != "glibc" else None
    found = libs.found or {}
    nvidia = (None if driver.lower() in _NONE else driver) if driver is not None \
        else (_nvidia_driver(root) if linux else None)
    gpu = _gpu(env, root, linux, native, nvidia, libs.found)
    stated_version = env.get("SUPERFLUID_HOST_CUDA_RUNTIME_VERSION")
    return Host(
        os=system,
        arch=arch,
        nvidia_driver=nvidia,
        cuda_runtime=_cuda_major(cuda, stated_version) if cuda is not None or stated_version is not None
        else (_cuda_runtime(root, libs.dirs) if linux else None),
        rocm=_flag(rocm) if rocm is not None else (linux and _rocm(root)),
        vulkan=_flag(vulkan) if vulkan is not None else (linux and _vulkan(root, found)),
        glibc=(glibc or None) if glibc is not None else (libs.glibc if libc == "glibc" else None),
        memory=int(memory) if memory else _memory(),
        libc=libc,
        glibcxx=_text(env, "SUPERFLUID_HOST_GLIBCXX", libs.glibcxx),
        cxxabi=_text(env, "SUPERFLUID_HOST_CXXABI", libs.cxxabi),
        library_dirs=libs.dirs,
        cpu_features=_words(features) if features is not None
        else (_cpu_features(root, arch) if linux and native else ()),
        libraries=libs.found,
        cuda_capabilities=gpu.capabilities,
        gpu_names=gpu.names,
        cuda_runtime_version=gpu.cudart_version,
        cuda_runtime_reachable=gpu.cudart_reachable,
        rocm_version=gpu.rocm_version,
        rocm_gfx=gpu.rocm_gfx,
        vulkan_icds=gpu.icds,
    )
