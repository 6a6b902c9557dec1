"""The cudart retry on real files (issue 32, item 4): a CUDA build whose GPU module needs a
``libcudart.so.12`` the host does not have fails its probe with the loader's words, and the same
build is retried with its ``cudart-llama-...`` archive before the CPU.

The GPU module is a real shared object built here with ``cc``: a ggml backend module (compiled
against the ggml backend header of the v2 libllama's own source tree) registering one device
``CUDA0``, which calls into a stub ``libcudart.so.12`` built beside it and shipped only in the
cudart archive. The real v2 libllama loads it through ``ggml_backend_load``.
"""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import native_script
from tests.end_to_end.conftest import Home
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer

REPO = "ggml-org/llama.cpp"
MAIN = "llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz"
CUDART = "cudart-llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz"

_CUDART_C = "int cudart_stub_version(void) { return 12080; }\n"
_MODULE_C = r"""
#include <stddef.h>
#include "ggml-backend-impl.h"

int cudart_stub_version(void);

static const char * dev_name(ggml_backend_dev_t dev) { (void) dev; return "CUDA0"; }
static const char * dev_description(ggml_backend_dev_t dev) {
    (void) dev; return cudart_stub_version() == 12080 ? "stub GPU (CUDA 12.8)" : "stub GPU";
}
static void dev_memory(ggml_backend_dev_t dev, size_t * free, size_t * total) {
    (void) dev; *free = (size_t) 1 << 30; *total = (size_t) 1 << 31;
}
static enum ggml_backend_dev_type dev_type(ggml_backend_dev_t dev) { (void) dev; return GGML_BACKEND_DEVICE_TYPE_GPU; }

static struct ggml_backend_reg reg;
static struct ggml_backend_device device = {
    .iface = { .get_name = dev_name, .get_description = dev_description, .get_memory = dev_memory,
               .get_type = dev_type },
    .reg = &reg,
    .context = NULL,
};
static const char * reg_name(ggml_backend_reg_t r) { (void) r; return "CUDA"; }
static size_t reg_count(ggml_backend_reg_t r) { (void) r; return 1; }
static ggml_backend_dev_t reg_device(ggml_backend_reg_t r, size_t i) { (void) r; (void) i; return &device; }
static struct ggml_backend_reg reg = {
    .api_version = GGML_BACKEND_API_VERSION,
    .iface = { .get_name = reg_name, .get_device_count = reg_count, .get_device = reg_device,
               .get_proc_address = NULL },
    .context = NULL,
};

ggml_backend_reg_t ggml_backend_init(void) { return &reg; }
"""


def _tar_gz(files: dict[str, Path]) -> bytes:
    """A flat ``.tar.gz`` of ``files`` (name -> path), as upstream's cudart archive is laid out."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in sorted(files.items()):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, 1_767_225_600
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _impl_header(into: Path) -> Path:
    """``ggml/src/ggml-backend-impl.h`` of the v2 libllama's pinned source distribution, in ``into``."""
    build = native_script("build_libllama")
    pin = build.PINS["v2"]
    sdist = build.cache_root() / "llamacpp" / "downloads" / pin.sdist
    if not sdist.is_file():
        pytest.skip(f"the v2 source distribution is not in the native cache ({sdist})")
    member = f"{pin.tree}/ggml/src/ggml-backend-impl.h"
    with tarfile.open(sdist) as tar:
        extracted = tar.extractfile(member)
        assert extracted is not None
        (into / "ggml-backend-impl.h").write_bytes(extracted.read())
    return into


@pytest.fixture(scope="module")
def gpu_module(tmp_path_factory: pytest.TempPathFactory, libllama_v2: Path) -> tuple[Path, Path]:
    """(a lib folder: the v2 libllama with ``libggml-cuda.so``, the folder of ``libcudart.so.12``)."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler here")
    work = tmp_path_factory.mktemp("cudart")
    runtime, lib = work / "cudart", work / "lib"
    runtime.mkdir()
    shutil.copytree(libllama_v2, lib, symlinks=True, ignore=shutil.ignore_patterns("include", "build.json"))
    (work / "cudart.c").write_text(_CUDART_C)
    (work / "module.c").write_text(_MODULE_C)
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(runtime / "libcudart.so.12"),
                    str(work / "cudart.c")], check=True, capture_output=True, timeout=120)
    subprocess.run([cc, "-shared", "-fPIC", "-I", str(_impl_header(work)), "-I", str(libllama_v2 / "include"),
                    "-o", str(lib / "libggml-cuda.so"), str(work / "module.c"), "-Wl,--no-as-needed",
                    "-L", str(runtime), "-l:libcudart.so.12", "-Wl,-rpath,$ORIGIN"],
                   check=True, capture_output=True, timeout=120)
    return lib, runtime


def test_a_missing_cuda_runtime_is_retried_with_the_cudart_archive(cli_home: Home, tmp_path: Path,
                                                                    gpu_module: tuple[Path, Path]) -> None:
    """Issue 32, done when: the host says its CUDA 12 runtime serves (so the plan trusts it), the
    loader does not find it; the probe fails naming libcudart.so.12, and the same build with its
    cudart archive installs, its check seeing the CUDA device."""
    lib, runtime = gpu_module
    server = ReleaseServer()  # never started: written as a mirror folder
    server.add_release(REPO, "b11642", {MAIN: libllama_archive(lib),
                                        CUDART: _tar_gz({"libcudart.so.12": runtime / "libcudart.so.12"})})
    mirror = server.write_mirror(tmp_path / "mirror")
    cli_home.env.update(SUPERFLUID_HOST_NVIDIA_DRIVER="550.54.15", SUPERFLUID_HOST_CUDA_CAPABILITY="8.6",
                        SUPERFLUID_HOST_CUDA_RUNTIME="12", SUPERFLUID_HOST_CUDA_RUNTIME_VERSION="12.8",
                        SUPERFLUID_HOST_CUDA_RUNTIME_REACHABLE="1", SUPERFLUID_HOST_VULKAN="0")
    dry = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", str(mirror), "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    first = dry.json()["plans"][0]
    assert first["install"] == "b11642-cuda-12.8" and [a["name"] for a in first["assets"]] == [MAIN]
    assert [a["name"] for a in first["retry"]["assets"]] == [MAIN, CUDART]
    run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", str(mirror), "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["installed"] == "b11642-cuda-12.8", doc
    assert len(doc["fallbacks"]) == 1 and doc["fallbacks"][0]["install"] == "b11642-cuda-12.8"
    why = doc["fallbacks"][0]["why"]
    assert "libggml-cuda.so does not load: libcudart.so.12: cannot open shared object file" in why
    assert [Path(s["url"]).name for s in doc["receipt"]["sources"]] == [MAIN, CUDART]
    rows = cli_home.superfluid("runtimes", "--json").json()
    devices = next(r for r in rows if r["id"] == "llamacpp")["devices"]
    assert {"name": "CUDA0", "backend": "CUDA", "description": "stub GPU (CUDA 12.8)"}.items() <= devices[-1].items()
    installed = cli_home.path / "runtimes" / "llamacpp" / "b11642-cuda-12.8" / "lib"
    assert (installed / "libcudart.so.12").is_file() and (installed / "libggml-cuda.so").is_file()



_CPU_ONLY = '''
if args[:1] == ["check"]:
    print(json.dumps({"id": "llamacpp", "available": True, "runtime": {"version": "llama.cpp b11642"},
                      "devices": [{"index": 0, "name": "CPU", "backend": "CPU", "kind": "cpu"}],
                      "unloaded": {"libggml-cuda.so": "libcudart.so.12: cannot open shared object file: "
                                                      "No such file or directory"}}))
    sys.exit(0)
sys.exit(3)
'''


def test_a_gpu_build_that_finds_no_gpu_says_it_serves_on_the_cpu(cli_home: Home, tmp_path: Path,
                                                                  gpu_module: tuple[Path, Path]) -> None:
    """Issue 32, item 5: the current install is a CUDA build (installed from real files) and its
    library, checked, registers no CUDA device (a worker answering so): runtimes --json says why in
    ``no_gpu`` and the table says it; serve says it on stderr before it serves; a CPU device alone is
    never silent."""
    lib, runtime = gpu_module
    server = ReleaseServer()
    server.add_release(REPO, "b11642", {MAIN: libllama_archive(lib),
                                        CUDART: _tar_gz({"libcudart.so.12": runtime / "libcudart.so.12"})})
    mirror = server.write_mirror(tmp_path / "mirror")
    cli_home.env.update(SUPERFLUID_HOST_NVIDIA_DRIVER="550.54.15", SUPERFLUID_HOST_CUDA_CAPABILITY="8.6",
                        SUPERFLUID_HOST_VULKAN="0")
    done = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", str(mirror), "--json")
    assert done.code == 0 and done.json()["installed"] == "b11642-cuda-12.8", done.stderr
    row = next(r for r in cli_home.superfluid("runtimes", "--json").json() if r["id"] == "llamacpp")
    assert "no_gpu" not in row  # its check sees the CUDA device
    worker = tmp_path / "worker"
    worker.write_text(f"#!{sys.executable}\nimport json, sys\nargs = sys.argv[1:]\n{_CPU_ONLY}")
    worker.chmod(0o755)
    cli_home.env["SUPERFLUID_WORKER_LLAMACPP"] = str(worker)
    rows = cli_home.superfluid("runtimes", "--json")
    assert rows.code == 0, rows.stderr
    row = next(r for r in rows.json() if r["id"] == "llamacpp")
    assert row["state"] == "ready" and row["install"] == "b11642-cuda-12.8"
    assert row["no_gpu"] == ("b11642-cuda-12.8 is a cuda-12.8 build, and its check finds no cuda-12.8 device here "
                             "(it sees: CPU); libggml-cuda.so does not load: libcudart.so.12: cannot open shared "
                             "object file: No such file or directory: it serves on the CPU")
    assert f"llamacpp: {row['no_gpu']}" in cli_home.superfluid("runtimes").stdout
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    served = cli_home.superfluid("serve", "--model", str(model), "--runtime", "llamacpp")
    assert f"superfluid serve: {row['no_gpu']}" in served.stderr
