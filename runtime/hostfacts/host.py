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
from superfluid.runtime.hostfacts.overrides import ARM64_HWCAPS, X86_FEATURES, read
from superfluid.runtime.hostfacts.system import running_arch, running_os
from superfluid.runtime.kernel.jsonread import read_head
from superfluid.runtime.kernel.lookup import HOST_PREFIX, is_host_variable

__all__ = ["Host", "detect", "platform_string", "PROBED", "NOTABLE"]

_V = HOST_PREFIX
OS, ARCH, ROOT, LIBC, GLIBC, GLIBCXX, CXXABI, MEMORY, CPU_FEATURES, LIBRARY_PATH = (
    _V + n for n in ("OS", "ARCH", "ROOT", "LIBC", "GLIBC", "GLIBCXX", "CXXABI", "MEMORY", "CPU_FEATURES",
                     "LIBRARY_PATH"))
NVIDIA_DRIVER, CUDA_RUNTIME, CUDA_RUNTIME_VERSION, CUDA_RUNTIME_REACHABLE, CUDA_CAPABILITY = (
    _V + n for n in ("NVIDIA_DRIVER", "CUDA_RUNTIME", "CUDA_RUNTIME_VERSION", "CUDA_RUNTIME_REACHABLE",
                     "CUDA_CAPABILITY"))
ROCM, ROCM_VERSION, ROCM_GFX, VULKAN = (_V + n for n in ("ROCM", "ROCM_VERSION", "ROCM_GFX", "VULKAN"))

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
    cuda_runtime_path: str | None = None  # the libcudart.so.<N> found (the loader's first), a host path
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
                "cuda_runtime_path": self.cuda_runtime_path, "cuda_runtime_version": self.cuda_runtime_version,
                "cuda_runtime_reachable": self.cuda_runtime_reachable, "rocm_version": self.rocm_version,
                "rocm_gfx": list(self.rocm_gfx), "vulkan_icds": list(self.vulkan_icds)}


def platform_string(os_name: str, arch: str) -> str:
    return f"{os_name}-{arch}"


_NVIDIA_VERSION = "/proc/driver/nvidia/version"
_CUDA_DIRS = CUDA_DIRS
_VULKAN_ICD_DIRS = VULKAN_ICD_DIRS
_KFD, _ROCM, _CPUINFO = "/dev/kfd", "/opt/rocm", "/proc/cpuinfo"
#: bytes of /proc/cpuinfo read: the first processor's lines, however many processors follow
_CPUINFO_HEAD = 64 << 10
#: what the probes below read: a file or directory whose change (a driver, a CUDA runtime, ROCm,
#: Vulkan or a library installed or removed) may change a fact; for keepers of answers computed
#: from the facts
PROBED: tuple[str, ...] = (_NVIDIA_VERSION, *_CUDA_DIRS, _KFD, _ROCM, "/etc/ld.so.cache", "/lib64", "/usr/lib64",
                           "/lib", "/usr/lib", "/usr/local/lib", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                           *_VULKAN_ICD_DIRS)


def _nvidia_driver(root: str) -> str | None:
    try:
        first = read_head(under(root, _NVIDIA_VERSION), 4096).decode("utf-8", "replace").split("\n", 1)[0]
    except OSError:  # nothing there, or no regular file (a FIFO, a link to /dev/zero): not known
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
    try:  # the first processor's lines are in the file's head, however many processors follow
        text = read_head(under(root, _CPUINFO), _CPUINFO_HEAD).decode("utf-8", "replace")
    except OSError:  # nothing there, or no regular file (a FIFO, a link to /dev/zero): not known
        return ()
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            words = set(value.split())
            return tuple(k for k in known if k in words)
    return ()


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def detect(environ: Mapping[str, str] | None = None) -> Host:
    """The running host's facts, each overridden by its ``SUPERFLUID_HOST_*`` variable when set
    (``LD_LIBRARY_PATH`` is read too: the loader searches it first). The probes read their files
    under ``/``, or under ``SUPERFLUID_HOST_ROOT`` (a test's fake root laid out as a distribution
    lays out its libraries); ``runtime/hostfacts/libraries.py`` finds the libraries and reads the C and C++
    libraries' versions.

    Raises:
        UsageError: an override is outside its form (``hostfacts.overrides``), or two contradict.
    """
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


def _libraries(facts: Mapping[str, Any], loader_path: str | None, root: str, arch: str,
               native: bool) -> _Libraries:
    """The library facts of a Linux host: probed under ``root`` when it is this machine (``native``:
    its platform is the one it runs on, or a root is named), else only what ``facts`` state."""
    named: tuple[str, ...] | None = facts.get(LIBRARY_PATH)
    if not native and named is None:
        return _Libraries()
    if named is not None:
        cached: list[tuple[str, str]] = []
        dirs = tuple(d for d in named if os.path.isdir(under(root, d)))
    else:
        cached = ldconfig(root)
        dirs = library_dirs(root, arch, loader_path, cached)
    found = libraries_in(root, dirs, cached)
    stated = _glibc() if root == "/" else glibc_defined(root, found)
    glibcxx, cxxabi = libstdcxx_versions(root, found)
    return _Libraries(libc_of(root, found, stated), stated, glibcxx, cxxabi, dirs, found)


class _Gpu(NamedTuple):
    """The GPU facts beyond the driver's version: each NVIDIA GPU's capability (and name), the CUDA
    runtime found (its path, version and reach), ROCm's version and gfx targets, Vulkan's ICD files."""

    capabilities: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    cudart_path: str | None = None
    cudart_version: str | None = None
    cudart_reachable: bool | None = None
    rocm_version: str | None = None
    rocm_gfx: tuple[str, ...] = ()
    icds: tuple[str, ...] = ()


def _gpu(facts: Mapping[str, Any], root: str, linux: bool, native: bool, driver: str | None,
         libraries: Mapping[str, str] | None) -> _Gpu:
    """The GPU facts (``gpufacts``), each overridden by its variable; only a Linux host's are probed.
    Only this machine's own GPUs are asked (``libcuda`` in a child process, else ``nvidia-smi``):
    not under a named root, nor for a host whose driver or capabilities are stated."""
    runtime_stated = CUDA_RUNTIME in facts or CUDA_RUNTIME_VERSION in facts
    path, reachable = (None, None) if runtime_stated or not linux else cudart_on_host(root, libraries)
    version = cudart_version_of(under(root, path)) if path else None
    caps: tuple[str, ...] = facts.get(CUDA_CAPABILITY, ())
    names: tuple[str, ...] = ()
    if linux and CUDA_CAPABILITY not in facts and NVIDIA_DRIVER not in facts and driver is not None \
            and root == "/" and native:
        caps, names, asked = probe_cuda(path if path and version is None else None)
        version = version or asked
    return _Gpu(
        capabilities=caps,
        names=names,
        cudart_path=path,
        cudart_version=facts[CUDA_RUNTIME_VERSION] if CUDA_RUNTIME_VERSION in facts else version,
        cudart_reachable=facts.get(CUDA_RUNTIME_REACHABLE, reachable),
        rocm_version=facts[ROCM_VERSION] if ROCM_VERSION in facts else rocm_version(root) if linux else None,
        rocm_gfx=facts[ROCM_GFX] if ROCM_GFX in facts else rocm_gfx(root) if linux else (),
        icds=vulkan_icds(root) if linux else (),
    )


def _cuda_major(facts: Mapping[str, Any], root: str, dirs: tuple[str, ...], linux: bool) -> int | None:
    """``SUPERFLUID_HOST_CUDA_RUNTIME`` (a major, or none), else the major of the runtime version
    stated (a version implies its runtime), else the probe's."""
    if CUDA_RUNTIME in facts:
        return facts[CUDA_RUNTIME]  # type: ignore[no-any-return]
    if CUDA_RUNTIME_VERSION in facts:
        version = facts[CUDA_RUNTIME_VERSION]
        return int(version.split(".")[0]) if version else None
    return _cuda_runtime(root, dirs) if linux else None


def _rocm_present(facts: Mapping[str, Any], root: str, linux: bool) -> bool:
    """``SUPERFLUID_HOST_ROCM``, else whether a ROCm version is stated (a version implies ROCm;
    ``none`` that there is none), else the probe's."""
    if ROCM in facts:
        return facts[ROCM]  # type: ignore[no-any-return]
    if ROCM_VERSION in facts:
        return facts[ROCM_VERSION] is not None
    return linux and _rocm(root)


def _libc(facts: Mapping[str, Any], probed: str | None) -> str | None:
    """``SUPERFLUID_HOST_LIBC``, else ``glibc`` where a glibc version is stated (none: the probed
    one if it is not glibc), else the probed one."""
    if LIBC in facts:
        return facts[LIBC]  # type: ignore[no-any-return]
    if GLIBC in facts:
        return "glibc" if facts[GLIBC] else probed if probed != "glibc" else None
    return probed


@lru_cache(maxsize=8)
def _detect(overrides: tuple[tuple[str, str], ...]) -> Host:
    env = dict(overrides)
    facts = read(env)
    system, arch = facts.get(OS) or running_os(), facts.get(ARCH) or running_arch()
    root: str = facts.get(ROOT, "/")
    linux = system == "linux"
    # a platform other than the one this runs on is a host described, not this machine: its C
    # library and libraries are not this machine's (a root named is read as that host's)
    native = root != "/" or (system, arch) == (running_os(), running_arch())
    libs = _libraries(facts, env.get("LD_LIBRARY_PATH"), root, arch, native) if linux else _Libraries()
    libc = _libc(facts, libs.libc)
    found = libs.found or {}
    nvidia = facts[NVIDIA_DRIVER] if NVIDIA_DRIVER in facts else (_nvidia_driver(root) if linux else None)
    gpu = _gpu(facts, root, linux, native, nvidia, libs.found)
    return Host(
        os=system,
        arch=arch,
        nvidia_driver=nvidia,
        cuda_runtime=_cuda_major(facts, root, libs.dirs, linux),
        rocm=_rocm_present(facts, root, linux),
        vulkan=facts[VULKAN] if VULKAN in facts else (linux and _vulkan(root, found)),
        glibc=facts[GLIBC] if GLIBC in facts else (libs.glibc if libc == "glibc" else None),
        memory=facts[MEMORY] if MEMORY in facts else _memory(),
        libc=libc,
        glibcxx=facts[GLIBCXX] if GLIBCXX in facts else libs.glibcxx,
        cxxabi=facts[CXXABI] if CXXABI in facts else libs.cxxabi,
        library_dirs=libs.dirs,
        cpu_features=facts[CPU_FEATURES] if CPU_FEATURES in facts
        else (_cpu_features(root, arch) if linux and native else ()),
        libraries=libs.found,
        cuda_capabilities=gpu.capabilities,
        gpu_names=gpu.names,
        cuda_runtime_path=gpu.cudart_path,
        cuda_runtime_version=gpu.cudart_version,
        cuda_runtime_reachable=gpu.cudart_reachable,
        rocm_version=gpu.rocm_version,
        rocm_gfx=gpu.rocm_gfx,
        vulkan_icds=gpu.icds,
    )
