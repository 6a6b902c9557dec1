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

from superfluid.runtime.hostfacts.factfiles import Unread, read_fact, under
from superfluid.runtime.hostfacts.gpufacts import (
    CUDA_DIRS,
    VULKAN_ICD_DIRS,
    CudaRuntime,
    ask_cudart,
    cuda_runtime,
    cudart_version_of,
    probe_cuda,
    rocm_gfx,
    rocm_version,
    vulkan_icds,
)
from superfluid.runtime.hostfacts.libraries import (
    Search,
    glibc_defined,
    libc_of,
    libraries_in,
    libstdcxx_versions,
    loader_search,
)
from superfluid.runtime.hostfacts.machine import Distribution, distribution, kernel_release, x86_64_level
from superfluid.runtime.hostfacts.overrides import ARM64_HWCAPS, X86_FEATURES, read, set_by
from superfluid.runtime.hostfacts.system import running_arch, running_os
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
    ``library_dirs`` the folders the dynamic loader searches, in its order (``libraries.Search``);
    ``libraries`` each library name it finds there and where (None: not probed, so no library is
    judged missing); ``cpu_features`` those of ``X86_FEATURES``/``ARM64_HWCAPS`` the CPU has (empty:
    not known); ``unread`` each fact file that is there and could not be read (its fact is then not
    known); ``set_by`` each fact a ``SUPERFLUID_HOST_*`` variable set, and which.
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
    distribution: Distribution | None = None  # as /etc/os-release names it
    kernel: str | None = None  # the kernel's release, "6.1.0-18-amd64"
    x86_64_level: str | None = None  # "v1".."v4" on x86-64, from the CPU's features; None elsewhere or not known
    unread: tuple[Unread, ...] = ()  # the fact files refused, by path
    set_by: tuple[tuple[str, str], ...] = ()  # (fact, SUPERFLUID_HOST_* variable), in the table's order

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
                "rocm_gfx": list(self.rocm_gfx), "vulkan_icds": list(self.vulkan_icds),
                "distribution": self.distribution.to_json() if self.distribution else None, "kernel": self.kernel,
                "x86_64_level": self.x86_64_level, "unread": [u.to_json() for u in self.unread],
                "set_by": dict(self.set_by)}


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
PROBED: tuple[str, ...] = (_NVIDIA_VERSION, *_CUDA_DIRS, _KFD, _ROCM, "/etc/ld.so.cache", "/etc/ld-musl-x86_64.path",
                           "/etc/ld-musl-aarch64.path", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
                           "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                           "/usr/lib/aarch64-linux-gnu", *_VULKAN_ICD_DIRS)


def _nvidia_driver(root: str, unread: list[Unread]) -> str | None:
    data = read_fact(root, _NVIDIA_VERSION, "nvidia_driver", unread, max_bytes=4096, head=True)
    first = (data or b"").decode("utf-8", "replace").split("\n", 1)[0]
    for token in first.split():
        if re.fullmatch(r"\d+(\.\d+)+", token):
            return token
    return None


def _names(folder: str) -> list[str]:
    """The names in ``folder`` (none when it cannot be listed)."""
    try:
        return os.listdir(folder)
    except OSError:
        return []


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


def _cpu_flags(root: str, arch: str, unread: list[Unread]) -> set[str] | None:
    """The features of the first processor ``/proc/cpuinfo`` describes (its ``flags`` line on x86,
    its ``Features`` line on arm64), or None (not known)."""
    fact = "cpu_features, x86_64_level" if arch == "x64" else "cpu_features"
    # the first processor's lines are in the file's head, however many processors follow
    data = read_fact(root, _CPUINFO, fact, unread, max_bytes=_CPUINFO_HEAD, head=True)
    key = "flags" if arch == "x64" else "Features"
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return set(value.split())
    return None


def _cpu_features(flags: set[str] | None, arch: str) -> tuple[str, ...]:
    """Those of ``X86_FEATURES`` or ``ARM64_HWCAPS`` among the CPU's ``flags``."""
    known = X86_FEATURES if arch == "x64" else ARM64_HWCAPS
    return tuple(k for k in known if k in (flags or ()))


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
               native: bool, unread: list[Unread]) -> _Libraries:
    """The library facts of a Linux host: probed under ``root`` when it is this machine (``native``:
    its platform is the one it runs on, or a root is named), else only what ``facts`` state. The
    folders are the loader's (``libraries.loader_search``), or those ``SUPERFLUID_HOST_LIBRARY_PATH``
    names (each listed, in its order)."""
    named: tuple[str, ...] | None = facts.get(LIBRARY_PATH)
    if not native and named is None:
        return _Libraries()
    if named is not None:
        search = Search(env=tuple(dict.fromkeys(d for d in named if os.path.isdir(under(root, d)))))
    else:
        search = loader_search(root, arch, loader_path, unread)
    found = libraries_in(root, search)
    stated = _glibc() if root == "/" else glibc_defined(root, found, unread)
    glibcxx, cxxabi = libstdcxx_versions(root, found, unread)
    return _Libraries(libc_of(root, found, stated), stated, glibcxx, cxxabi, search.dirs, found)


class _Gpu(NamedTuple):
    """The GPU facts beyond the driver's version: each NVIDIA GPU's capability (and name), the CUDA
    runtime found (its path, version, reach and usable major), ROCm's version and gfx targets,
    Vulkan's ICD files."""

    capabilities: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    cudart: CudaRuntime = CudaRuntime()
    cudart_version: str | None = None
    rocm_version: str | None = None
    rocm_gfx: tuple[str, ...] = ()
    icds: tuple[str, ...] = ()


def _gpu(facts: Mapping[str, Any], root: str, linux: bool, native: bool, driver: str | None,
         libraries: Mapping[str, str] | None, unread: list[Unread]) -> _Gpu:
    """The GPU facts (``gpufacts``), each overridden by its variable; only a Linux host's are probed.
    Only this machine's own GPUs and CUDA runtime are asked (``libcuda`` in a child process, else
    ``nvidia-smi``; the runtime's version, where its file name does not say it, in a child process):
    never a file under a named root, nor for a host whose driver or capabilities are stated."""
    runtime_stated = CUDA_RUNTIME in facts or CUDA_RUNTIME_VERSION in facts
    cudart = CudaRuntime() if runtime_stated or not linux else cuda_runtime(root, libraries)
    version = cudart_version_of(under(root, cudart.path)) if cudart.path else None
    caps: tuple[str, ...] = facts.get(CUDA_CAPABILITY, ())
    names: tuple[str, ...] = ()
    mine = linux and root == "/" and native
    if mine and CUDA_CAPABILITY not in facts and NVIDIA_DRIVER not in facts and driver is not None:
        caps, names = probe_cuda()
    if mine and cudart.path and version is None:
        version = ask_cudart(cudart.path)
    return _Gpu(
        capabilities=caps,
        names=names,
        cudart=cudart,
        cudart_version=facts[CUDA_RUNTIME_VERSION] if CUDA_RUNTIME_VERSION in facts else version,
        rocm_version=facts[ROCM_VERSION] if ROCM_VERSION in facts else rocm_version(root, unread) if linux else None,
        rocm_gfx=facts[ROCM_GFX] if ROCM_GFX in facts else rocm_gfx(root, unread) if linux else (),
        icds=vulkan_icds(root) if linux else (),
    )


def _cuda_major(facts: Mapping[str, Any], found: CudaRuntime) -> int | None:
    """``SUPERFLUID_HOST_CUDA_RUNTIME`` (a major, or none), else the major of the runtime version
    stated (a version implies its runtime), else that of the runtime found, when its cuBLAS lies
    beside it (``gpufacts.cuda_runtime``)."""
    if CUDA_RUNTIME in facts:
        return facts[CUDA_RUNTIME]  # type: ignore[no-any-return]
    if CUDA_RUNTIME_VERSION in facts:
        version = facts[CUDA_RUNTIME_VERSION]
        return int(version.split(".")[0]) if version else None
    return found.major


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


class _Cpu(NamedTuple):
    """The CPU's facts: its features of ``X86_FEATURES``/``ARM64_HWCAPS`` and its x86-64 level."""

    features: tuple[str, ...] = ()
    level: str | None = None


def _cpu(facts: Mapping[str, Any], root: str, arch: str, probed: bool, unread: list[Unread]) -> _Cpu:
    """``SUPERFLUID_HOST_CPU_FEATURES`` (then the level is not known: the features it may name do
    not tell one), else what ``/proc/cpuinfo`` says where the host is ``probed``."""
    if CPU_FEATURES in facts:
        return _Cpu(facts[CPU_FEATURES], None)
    flags = _cpu_flags(root, arch, unread) if probed else None
    level = x86_64_level(flags) if flags is not None and arch == "x64" else None
    return _Cpu(_cpu_features(flags, arch), level)


class _System(NamedTuple):
    """The distribution and the kernel's release."""

    distribution: Distribution | None = None
    kernel: str | None = None


def _system(root: str, linux: bool, native: bool, unread: list[Unread]) -> _System:
    """The distribution (a Linux host's os-release) and the kernel's release of this machine, or of
    the one laid out under a named root; nothing of a host described."""
    if not native:
        return _System()
    return _System(distribution(root, unread) if linux else None, kernel_release(root, unread))


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
    unread: list[Unread] = []
    libs = _libraries(facts, env.get("LD_LIBRARY_PATH"), root, arch, native, unread) if linux else _Libraries()
    libc = _libc(facts, libs.libc)
    found = libs.found or {}
    nvidia = facts[NVIDIA_DRIVER] if NVIDIA_DRIVER in facts else (_nvidia_driver(root, unread) if linux else None)
    gpu = _gpu(facts, root, linux, native, nvidia, libs.found, unread)
    cpu = _cpu(facts, root, arch, linux and native, unread)
    machine = _system(root, linux, native, unread)
    return Host(
        os=system,
        arch=arch,
        nvidia_driver=nvidia,
        cuda_runtime=_cuda_major(facts, gpu.cudart),
        rocm=_rocm_present(facts, root, linux),
        vulkan=facts[VULKAN] if VULKAN in facts else (linux and _vulkan(root, found)),
        glibc=facts[GLIBC] if GLIBC in facts else (libs.glibc if libc == "glibc" else None),
        memory=facts[MEMORY] if MEMORY in facts else _memory(),
        libc=libc,
        glibcxx=facts[GLIBCXX] if GLIBCXX in facts else libs.glibcxx,
        cxxabi=facts[CXXABI] if CXXABI in facts else libs.cxxabi,
        library_dirs=libs.dirs,
        cpu_features=cpu.features,
        libraries=libs.found,
        cuda_capabilities=gpu.capabilities,
        gpu_names=gpu.names,
        cuda_runtime_path=gpu.cudart.path,
        cuda_runtime_version=gpu.cudart_version,
        cuda_runtime_reachable=facts.get(CUDA_RUNTIME_REACHABLE, gpu.cudart.reachable),
        rocm_version=gpu.rocm_version,
        rocm_gfx=gpu.rocm_gfx,
        vulkan_icds=gpu.icds,
        distribution=machine.distribution,
        kernel=machine.kernel,
        x86_64_level=cpu.level,
        unread=tuple(sorted(dict.fromkeys(unread), key=lambda u: u.path)),
        set_by=tuple(set_by(env).items()),
    )
