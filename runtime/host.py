"""Host facts: platform, accelerators and libc, each overridable by a ``SUPERFLUID_HOST_*`` variable.

See docs/cli.md, "Environment".
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache

__all__ = ["Host", "detect", "platform_string", "PROBED"]

_NONE = ("none", "no", "false", "0", "")


@dataclass(frozen=True, slots=True)
class Host:
    """What the resolver and planners need to know about this machine."""

    os: str  # "linux" | "macos"
    arch: str  # "x64" | "arm64"
    nvidia_driver: str | None = None
    cuda_runtime: int | None = None
    rocm: bool = False
    vulkan: bool = False
    glibc: str | None = None
    memory: int | None = None  # bytes of physical memory

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

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def platform_string(os_name: str, arch: str) -> str:
    return f"{os_name}-{arch}"


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    return value if value else None


def _os() -> str:
    return "macos" if os.uname().sysname == "Darwin" else "linux"  # platform.system()


def _arch() -> str:
    machine = os.uname().machine.lower()  # platform.machine()
    return "arm64" if machine in ("arm64", "aarch64") else "x64"


_NVIDIA_VERSION = "/proc/driver/nvidia/version"
_CUDA_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
              "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
_VULKAN_ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
_KFD, _ROCM, _USR_LIB = "/dev/kfd", "/opt/rocm", "/usr/lib"
#: what the probes below read: a file or directory whose change (a driver, a CUDA runtime, ROCm or
#: Vulkan installed or removed) may change a fact; for keepers of answers computed from the facts
PROBED: tuple[str, ...] = (_NVIDIA_VERSION, *_CUDA_DIRS, _KFD, _ROCM, _USR_LIB, *_VULKAN_ICD_DIRS)


def _nvidia_driver() -> str | None:
    try:
        with open(_NVIDIA_VERSION, encoding="utf-8", errors="replace") as f:
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


def _cuda_runtime() -> int | None:
    """The newest CUDA major whose runtime (``libcudart.so.<N>``) and cuBLAS (``libcublas.so.<N>``)
    sit in the same one of the folders."""
    majors: set[int] = set()
    for d in _CUDA_DIRS:
        found: dict[str, set[int]] = {"libcudart": set(), "libcublas": set()}
        for name in _names(d):
            if m := _CUDA_SONAME.match(name):
                found[m.group(1)].add(int(m.group(2)))
        majors |= found["libcudart"] & found["libcublas"]
    return max(majors) if majors else None


def _rocm() -> bool:
    return os.path.exists(_KFD) and os.path.isdir(_ROCM)


def _vulkan() -> bool:
    """A Vulkan loader by the name programs open it (``libvulkan.so.1``, in ``/usr/lib`` or a folder
    of it) and an installable client driver (a ``.json`` in an ICD folder)."""
    loader = "libvulkan.so.1"
    libs = os.path.exists(os.path.join(_USR_LIB, loader)) or any(
        os.path.exists(os.path.join(_USR_LIB, d, loader)) for d in _names(_USR_LIB))
    return libs and any(n.endswith(".json") for d in _VULKAN_ICD_DIRS for n in _names(d))


def _glibc() -> str | None:
    try:  # what platform.libc_ver() reads first ("glibc 2.36"), without reading the executable
        stated = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        stated = None
    parts = (stated or "").split(maxsplit=1)
    if len(parts) == 2:
        name, version = parts
    else:
        name, version = platform.libc_ver()
    return version if name == "glibc" and version else None


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _flag(value: str) -> bool:
    return value.lower() not in _NONE


def detect(environ: Mapping[str, str] | None = None) -> Host:
    """The running host's facts, each overridden by its ``SUPERFLUID_HOST_*`` variable when set."""
    env = os.environ if environ is None else environ
    return _detect(tuple(sorted((k, v) for k, v in env.items() if k.startswith("SUPERFLUID_HOST_"))))


@lru_cache(maxsize=8)
def _detect(overrides: tuple[tuple[str, str], ...]) -> Host:
    env = dict(overrides)
    os_name = _env(env, "SUPERFLUID_HOST_OS") or _os()
    arch = _env(env, "SUPERFLUID_HOST_ARCH") or _arch()
    driver = env.get("SUPERFLUID_HOST_NVIDIA_DRIVER")
    cuda = env.get("SUPERFLUID_HOST_CUDA_RUNTIME")
    rocm = env.get("SUPERFLUID_HOST_ROCM")
    vulkan = env.get("SUPERFLUID_HOST_VULKAN")
    glibc = env.get("SUPERFLUID_HOST_GLIBC")
    memory = env.get("SUPERFLUID_HOST_MEMORY")
    linux = os_name == "linux"
    return Host(
        os=os_name,
        arch=arch,
        nvidia_driver=(None if driver.lower() in _NONE else driver) if driver is not None
        else (_nvidia_driver() if linux else None),
        cuda_runtime=(None if cuda.lower() in _NONE else int(cuda)) if cuda is not None
        else (_cuda_runtime() if linux else None),
        rocm=_flag(rocm) if rocm is not None else (linux and _rocm()),
        vulkan=_flag(vulkan) if vulkan is not None else (linux and _vulkan()),
        glibc=(glibc or None) if glibc is not None else _glibc(),
        memory=int(memory) if memory else _memory(),
    )
