"""What a GPU build's kernels run on, as data, and the verdict on a host's GPUs before the download.

See docs/install.md, "How a GPU build is chosen".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.hostfacts.host import Host

# A CUDA build carries cubins (machine code for one architecture: it runs on GPUs of the same major
# and a minor at or above it) and PTX (which the driver compiles for any GPU at or above it, when the
# driver is at least as new as the toolkit that wrote it). An architecture may carry a suffix (the CUDA
# Programming Guide on arch- and family-specific features; NVIDIA's CUDA 12.9 notes on the latter): ``a``
# (arch-specific, ``sm_90a``): cubin and PTX alike run on exactly that compute capability and no other;
# ``f`` (family-specific, CUDA 12.9 on, ``sm_100f``): on GPUs of the same major at that minor or above
# (10.0 and 10.3 for ``sm_100f``, 10.3 alone for ``sm_103f``), PTX too, never on another major. A ROCm
# build carries code objects for named gfx targets and links one ROCm major.
__all__ = ["Kernels", "InvalidKernels", "CUDA_DRIVER_FLOOR", "TOOLKIT_DRIVER", "arch_key", "upstream_cuda_kernels",
           "from_cmake", "driver_major", "covers", "cuda_refusal", "rocm_refusal", "cudart_serves"]

#: CUDA major -> the NVIDIA driver major (at least) that runs it (NVIDIA's CUDA compatibility table:
#: minor version compatibility lets any 12.x run on 525+, any 13.x on 580+)
CUDA_DRIVER_FLOOR: dict[int, int] = {13: 580, 12: 525}
#: CUDA toolkit major.minor -> the driver (at least) its own release ships with (the CUDA toolkit
#: release notes, table 3, Linux): PTX that toolkit wrote is compiled (JIT) only by a driver this
#: new; a toolkit not listed is judged by its major's floor alone
TOOLKIT_DRIVER: dict[tuple[int, int], tuple[int, ...]] = {
    (12, 0): (525, 60), (12, 1): (530, 30), (12, 2): (535, 54), (12, 3): (545, 23), (12, 4): (550, 54),
    (12, 5): (555, 42), (12, 6): (560, 28), (12, 8): (570, 26), (12, 9): (575, 51), (13, 0): (580, 65),
}
_ARCH = re.compile(r"sm_(\d+)(\d)(a|f)?")


class InvalidKernels(ValueError):
    """A kernels record that is not one (the message names the field)."""


def arch_key(arch: str) -> tuple[int, int, str] | None:
    """``sm_86`` -> (8, 6, ""), ``sm_120a`` -> (12, 0, "a"); None for a name that is not one."""
    m = _ARCH.fullmatch(arch)
    return (int(m.group(1)), int(m.group(2)), m.group(3) or "") if m else None


def _sm(arch: tuple[int, int, str]) -> str:
    return f"sm_{arch[0]}{arch[1]}{arch[2]}"


@dataclass(frozen=True, slots=True)
class Kernels:
    """The device code a GPU build carries: CUDA cubins and PTX by ``sm_XX``, or ROCm gfx targets."""

    cubin: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    gfx: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("cubin", "ptx", "gfx"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        return out

    @classmethod
    def from_json(cls, doc: Any) -> Kernels:
        """Kernels from ``to_json``'s form.

        Raises:
            InvalidKernels: not an object of lists of ``sm_XX`` (cubin, ptx) or ``gfxNNN`` (gfx).
        """
        if not isinstance(doc, Mapping):
            raise InvalidKernels(f"kernels must be an object (it is {type(doc).__name__})")
        lists: dict[str, tuple[str, ...]] = {}
        for key, ok in (("cubin", arch_key), ("ptx", arch_key), ("gfx", lambda s: re.fullmatch(r"gfx[0-9a-f]+", s))):
            value = doc.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and ok(v) for v in value):
                raise InvalidKernels(f"kernels.{key} must be a list of architectures (it is {value!r})")
            lists[key] = tuple(value)
        return cls(lists["cubin"], lists["ptx"], lists["gfx"])

    def lowest(self) -> str | None:
        """The oldest architecture any of its CUDA code is for (``sm_75``)."""
        keys = [k for k in (arch_key(a) for a in (*self.cubin, *self.ptx)) if k is not None]
        return _sm(min(keys)) if keys else None


def from_cmake(architectures: str) -> Kernels:
    """Kernels of ``CMAKE_CUDA_ARCHITECTURES`` (``75-virtual;86-real;120a-real``): ``-real`` a cubin,
    ``-virtual`` PTX, neither both.

    >>> from_cmake("75-virtual;86-real;90")
    Kernels(cubin=('sm_86', 'sm_90'), ptx=('sm_75', 'sm_90'), gfx=())
    """
    cubin, ptx = [], []
    for item in (a.strip() for a in architectures.split(";") if a.strip()):
        arch, _, kind = item.partition("-")
        if kind in ("", "real"):
            cubin.append(f"sm_{arch}")
        if kind in ("", "virtual"):
            ptx.append(f"sm_{arch}")
    return Kernels(tuple(cubin), tuple(ptx))


def upstream_cuda_kernels(cuda: Sequence[int]) -> Kernels:
    """What llama.cpp's release builds of CUDA ``cuda`` (major, minor) carry: its release workflow
    sets no ``CMAKE_CUDA_ARCHITECTURES`` and builds with ``GGML_NATIVE=OFF``, so
    ``ggml/src/ggml-cuda/CMakeLists.txt``'s default list applies (and turns ``120`` into ``120a``).

    >>> upstream_cuda_kernels((13, 4)).lowest(), upstream_cuda_kernels((12, 8)).lowest()
    ('sm_75', 'sm_50')
    """
    version = tuple(cuda[:2]) if len(cuda) >= 2 else (cuda[0], 0) if cuda else (0, 0)
    archs = [] if version >= (13, 0) else ["50-virtual", "61-virtual", "70-virtual"]
    archs += ["75-virtual", "80-virtual", "86-real", "89-real", "90-virtual"]
    if version >= (12, 8):
        archs.append("120a-real")
    if version >= (12, 9):
        archs.append("121a-real")
    return from_cmake(";".join(archs))


def driver_major(driver: str | None) -> int | None:
    m = re.match(r"(\d+)", driver or "")
    return int(m.group(1)) if m else None


def _driver_key(driver: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", driver or "")[:2])


def _capability(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def covers(arch: tuple[int, int, str], gpu: tuple[int, int], *, ptx: bool) -> bool:
    """Whether code for ``arch`` (``arch_key``'s form) runs on a GPU of compute capability ``gpu``, by
    NVIDIA's rules: an ``a`` architecture on exactly its own (a cubin, or PTX the driver compiles for
    that GPU alone); an ``f`` one, and any cubin, on the same major at its minor or above; plain PTX on
    its own or any newer one.

    >>> covers((12, 0, "a"), (12, 1), ptx=False), covers((10, 0, "f"), (10, 3), ptx=True)
    (False, True)
    >>> covers((9, 0, "a"), (10, 0), ptx=True), covers((9, 0, ""), (10, 0), ptx=True)
    (False, True)
    """
    major, minor, suffix = arch
    if suffix == "a":
        return (major, minor) == gpu
    if suffix == "f" or not ptx:
        return major == gpu[0] and minor <= gpu[1]
    return (major, minor) <= gpu


def _runs(gpu: tuple[int, int], kernels: Kernels) -> str | None:
    """How ``gpu`` runs ``kernels``: ``"cubin"``, ``"ptx"`` (the driver compiles it) or None."""
    if any(k is not None and covers(k, gpu, ptx=False) for k in map(arch_key, kernels.cubin)):
        return "cubin"
    if any(k is not None and covers(k, gpu, ptx=True) for k in map(arch_key, kernels.ptx)):
        return "ptx"
    return None


def _suffix_rules(kernels: Kernels) -> str:
    """The rule of each suffix ``kernels`` carry, said after a refusal they explain (or "")."""
    suffixes = {k[2] for k in map(arch_key, (*kernels.cubin, *kernels.ptx)) if k is not None}
    rules = [rule for suffix, rule in (("a", "an architecture with an a suffix runs only on that very GPU"),
                                       ("f", "one with an f suffix only on GPUs of its major, at its minor or "
                                             "above")) if suffix in suffixes]
    return f" ({'; '.join(rules)})" if rules else ""


def _kernel_list(kernels: Kernels) -> str:
    parts = []
    if kernels.cubin:
        parts.append(f"machine code for {', '.join(kernels.cubin)}")
    if kernels.ptx:
        parts.append(f"PTX for {', '.join(kernels.ptx)}")
    return " and ".join(parts) or "no kernels"


def cuda_refusal(host: Host, cuda: Sequence[int], kernels: Kernels | None) -> str | None:
    """Why a CUDA ``cuda`` (major, minor) build carrying ``kernels`` cannot run on ``host``'s GPUs,
    or None: the driver below the major's floor; a GPU that no cubin and no PTX covers (``covers``:
    the ``a`` and ``f`` suffixes kept); a GPU only PTX covers, with a driver older than the toolkit
    that wrote it. Facts not known (no driver, no capabilities, no kernels recorded) refuse nothing
    of what they would decide."""
    major_of = driver_major(host.nvidia_driver)
    floor = CUDA_DRIVER_FLOOR.get(cuda[0]) if cuda else None
    if major_of is not None and floor is not None and major_of < floor:
        return f"NVIDIA driver {major_of} runs CUDA {cuda[0]} builds from driver {floor} on"
    if kernels is None or not (kernels.cubin or kernels.ptx):
        return None
    reasons = []
    toolkit = TOOLKIT_DRIVER.get((cuda[0], cuda[1])) if len(cuda) >= 2 else None
    for i, text in enumerate(host.cuda_capabilities):
        gpu = _capability(text)
        if gpu is None:
            continue
        name = host.gpu_names[i] if i < len(host.gpu_names) and host.gpu_names[i] else \
            ("this host's GPU" if len(host.cuda_capabilities) == 1 else f"GPU {i}")
        sm = f"sm_{gpu[0]}{gpu[1]}"
        how = _runs(gpu, kernels)
        lowest = kernels.lowest()
        low = arch_key(lowest) if lowest else None
        if how is None and low is not None and gpu < (low[0], low[1]):
            reasons.append(f"{name} is {sm}; this build's kernels start at {lowest}")
        elif how is None:
            reasons.append(f"{name} is {sm}; this build carries {_kernel_list(kernels)}, none of which runs on "
                           f"it{_suffix_rules(kernels)}")
        elif how == "ptx" and toolkit is not None and host.nvidia_driver \
                and _driver_key(host.nvidia_driver) < toolkit:
            version = ".".join(str(p) for p in cuda[:2])
            reasons.append(f"{name} is {sm}, which runs this build only as PTX from CUDA {version}; NVIDIA driver "
                           f"{host.nvidia_driver} compiles it from driver {toolkit[0]} on")
    return "; ".join(dict.fromkeys(reasons)) or None


def _major(text: str | None) -> int | None:
    m = re.match(r"(\d+)", text or "")
    return int(m.group(1)) if m else None


def rocm_refusal(host: Host, rocm: str | None, kernels: Kernels | None) -> str | None:
    """Why a ROCm ``rocm`` (``10.0``) build carrying ``kernels`` cannot run on ``host``, or None: the
    host's ROCm of another major; no GPU whose gfx target the build carries. Facts not known refuse
    nothing of what they would decide."""
    reasons = []
    want, have = _major(rocm), _major(host.rocm_version)
    if want is not None and have is not None and want != have:
        reasons.append(f"this build needs ROCm {want}; this host has ROCm {host.rocm_version}")
    if kernels is not None and kernels.gfx and host.rocm_gfx and not set(host.rocm_gfx) & set(kernels.gfx):
        gpus = ", ".join(host.rocm_gfx)
        reasons.append(f"this host's GPU is {gpus}; this build's kernels are for {', '.join(kernels.gfx)}")
    return "; ".join(reasons) or None


def cudart_serves(host: Host, cuda: Sequence[int]) -> str | None:
    """Why the system's CUDA runtime does not serve a CUDA ``cuda`` build (it does when the host has
    one of its major that the loader reaches, of a version at least the build's), or None when it
    serves. A reach or version not known is taken as the loader's and new enough."""
    if not cuda or host.cuda_runtime != cuda[0]:
        return f"no CUDA {cuda[0] if cuda else ''} runtime on the system"
    if host.cuda_runtime_reachable is False:
        return f"the system's CUDA {cuda[0]} runtime is on none of the loader's paths"
    have = tuple(int(p) for p in re.findall(r"\d+", host.cuda_runtime_version or "")[:2])
    if len(have) == 2 and len(cuda) >= 2 and have < tuple(cuda[:2]):
        return (f"the system's CUDA runtime {have[0]}.{have[1]} is older than this build's "
                f"{cuda[0]}.{cuda[1]}")
    return None
