"""``superfluid-worker-llamacpp plan`` and ``install --into DIR --plan JSON``, run as programs.

``plan`` is answered for hosts named by ``SUPERFLUID_HOST_*``. ``install`` is given a directory whose
``lib`` holds a real libllama (v1 or v2, as the installer would leave it after extracting), or a
library that is not one; each run is a child process, so a crash in the library would fail the test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.receipt import read_receipt
from superfluid.runtime.llamacpp import layout as L
from tests import cli
from tests.conftest import ROOT, printed_receipt

#: a Linux x64 host with no accelerator at all, whatever this machine has
NO_GPU = {"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64", "SUPERFLUID_HOST_NVIDIA_DRIVER": "none",
          "SUPERFLUID_HOST_CUDA_RUNTIME": "none", "SUPERFLUID_HOST_ROCM": "0", "SUPERFLUID_HOST_VULKAN": "0"}
#: the build each real test library stands in for, by layout
BUILD = {"v1": "b11284", "v2": "b11642"}


def worker(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", *map(str, args)],
                          cwd=ROOT, env=cli.environment(**(env or {})), capture_output=True, text=True, timeout=120)


def plan(*flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = worker("plan", *flags, env={**NO_GPU, **(env or {})})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stderr == ""  # one line of JSON
    return json.loads(done.stdout)  # type: ignore[no-any-return]


# -- plan ----------------------------------------------------------------------------------------

def test_plan_without_a_gpu_is_the_newest_cpu_build_then_the_older_one() -> None:
    answer = plan()
    assert answer["describe"] == "Linux x64"
    assert answer["host"]["os"] == "linux" and answer["host"]["nvidia_driver"] is None
    assert [p["install"] for p in answer["plans"]] == ["b11642-cpu", "b11284-cpu"]
    newest, older = answer["plans"]
    assert newest["assets"] == [{"name": "llama-b11642-bin-ubuntu-x64.tar.gz", "sha256": None, "size": None,
                                 "url": "https://github.com/ggml-org/llama.cpp/releases/download/b11642/"
                                        "llama-b11642-bin-ubuntu-x64.tar.gz",
                                 "digest_source": "release", "checked": []}]  # settled by the installer
    assert newest["tested"] is True and newest["layout"] == "v2" and newest["why"] == "Linux x64: the CPU build"
    # b11284's digest is the published fact the recipe pins
    assert older["layout"] == "v1" and len(older["assets"]) == 1
    assert older["assets"][0]["sha256"] == "f53f2534e7ac8df1ef056117d215f1581feb6c426310d6423efac9adcdd5c2c8"
    assert older["assets"][0]["size"] == 17438632


def test_plan_with_an_nvidia_driver_puts_cuda_first_with_its_runtime_archive() -> None:
    answer = plan(env={"SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05"})
    assert answer["describe"] == "Linux x64, NVIDIA driver 580.95.05"
    assert answer["host"]["nvidia_driver"] == "580.95.05"
    assert [p["install"] for p in answer["plans"]] == ["b11642-cuda-13.4", "b11642-cpu", "b11284-cuda-13.4",
                                                        "b11284-cpu"]
    cuda = answer["plans"][0]
    assert [a["name"] for a in cuda["assets"]] == ["llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz",
                                                   "cudart-llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz"]
    assert cuda["why"].endswith("NVIDIA driver 580 runs CUDA 13; no CUDA 13 runtime on the system, so its archive too")
    # the system's own CUDA 13 runtime serves it: no side archive
    served = plan(env={"SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05", "SUPERFLUID_HOST_CUDA_RUNTIME": "13"})
    assert [a["name"] for a in served["plans"][0]["assets"]] == ["llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz"]
    # an older driver runs CUDA 12 at most
    old = plan(env={"SUPERFLUID_HOST_NVIDIA_DRIVER": "535.104.05"})
    assert old["plans"][0]["install"] == "b11642-cuda-12.8"


def test_plan_flags_name_a_version_a_backend_or_an_archive() -> None:
    assert [p["install"] for p in plan("--version", "b11284")["plans"]] == ["b11284-cpu"]
    vulkan = plan("--backend", "VULKAN", "--version", "b11642")["plans"]  # lower-cased, no fallback
    assert [p["install"] for p in vulkan] == ["b11642-vulkan"]
    assert vulkan[0]["why"] == "Linux x64: vulkan, as named"
    digest = "F53F2534E7AC8DF1EF056117D215F1581FEB6C426310D6423EFAC9ADCDD5C2C8"  # the pin, in upper case
    archive = plan("--from", "/srv/llama-b11284-bin-ubuntu-x64.tar.gz", f"--sha256={digest}")["plans"]
    assert archive == [{"id": "llamacpp", "version": "b11284", "backend": "cpu", "install": "b11284-cpu",
                        "assets": [{"name": "llama-b11284-bin-ubuntu-x64.tar.gz",
                                    "url": "/srv/llama-b11284-bin-ubuntu-x64.tar.gz", "sha256": digest.lower(),
                                    "size": 17438632, "digest_source": "pin", "checked": ["pin"]}],
                        "tested": True, "chosen_by": "from", "abi": None,
                        "why": "/srv/llama-b11284-bin-ubuntu-x64.tar.gz, as named",
                        "platform": "linux-x64", "layout": "v1"}]
    other = worker("plan", "--from", "/srv/llama-b11284-bin-ubuntu-x64.tar.gz", "--sha256=" + "ab" * 32, env=NO_GPU)
    assert other.returncode == 1 and "a pin is never overridden" in other.stderr


def test_an_untested_build_is_refused_and_the_listing_is_left_to_the_installer() -> None:
    done = worker("plan", "--version", "b11500", env=NO_GPU)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("superfluid-worker-llamacpp: llama.cpp b11500 is not a build this adapter was tested with "
                           "(tested: b11642, b11284); its C API may differ: pass --untested to install it anyway\n")
    done = worker("plan", "--version", "b11500", "--untested", env=NO_GPU)
    assert done.returncode == 1 and done.stdout == ""
    assert "known only from the release listing, and this worker never touches the network" in done.stderr
    assert "`superfluid runtime install llamacpp --version b11500 --untested` plans it from the release listing" \
        in done.stderr
    # a named archive needs no listing, but a remote one needs a digest (nothing is fetched unverified)
    digest = "ab" * 32
    untested = plan("--from", "https://example.invalid/llama-b11500-bin-ubuntu-x64.tar.gz", "--untested",
                    f"--sha256={digest}")["plans"]
    assert [(p["install"], p["tested"]) for p in untested] == [("b11500-cpu", False)]
    done = worker("plan", "--from", "https://example.invalid/llama-b11500-bin-ubuntu-x64.tar.gz", "--untested",
                  env=NO_GPU)
    assert done.returncode == 1 and "no SHA-256 to check it against" in done.stderr


@pytest.mark.parametrize(("flags", "message"), [
    (["--bogus"], "unknown flag --bogus"),
    (["--version"], "--version needs a value"),
    (["--backend", "cpu", "--backend", "cuda"], "--backend is given twice"),
    (["--sha256", "xyz"], "--sha256 'xyz' is not a SHA-256 (64 hexadecimal digits)"),
    (["--untested=yes"], "--untested takes no value"),
])
def test_a_bad_plan_flag_is_a_usage_error(flags: list[str], message: str) -> None:
    done = worker("plan", *flags, env=NO_GPU)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"superfluid-worker-llamacpp: {message}\n"


# -- install -------------------------------------------------------------------------------------

def extracted(into: Path, lib_dir: Path) -> Path:
    """``into/lib`` holding ``lib_dir``'s libraries, as the installer leaves it after extracting."""
    (into / "lib").mkdir(parents=True)
    for f in lib_dir.iterdir():
        if ".so" in f.name:
            shutil.copy2(f, into / "lib" / f.name, follow_symlinks=False)
    return into


def verified(p: dict[str, Any]) -> dict[str, Any]:
    """The plan as the installer passes it: every asset with the digest it verified."""
    out = json.loads(json.dumps(p))
    for a in out["assets"]:
        a["sha256"] = a["sha256"] or hashlib.sha256(a["name"].encode()).hexdigest()
    return out


def install(into: Path, p: dict[str, Any] | str) -> subprocess.CompletedProcess[str]:
    return worker("install", "--into", into, "--plan", p if isinstance(p, str) else json.dumps(p), env=NO_GPU)


def test_install_writes_a_valid_receipt_for_the_library_it_finds(libllama_each: Path, tmp_path: Path) -> None:
    layout = libllama_each.name
    into = extracted(tmp_path / "staging", libllama_each)
    p = verified(plan("--version", BUILD[layout])["plans"][0])
    p["chosen_by"] = "tested"
    written = printed_receipt(install(into, p), into)
    assert {k: written[k] for k in ("id", "install", "version", "backend", "link_w", "platforms", "worker", "tested",
                                    "abi", "chosen_by", "layout")} == {
        "id": "llamacpp", "install": f"{BUILD[layout]}-cpu", "version": BUILD[layout], "backend": "cpu",
        "link_w": [8], "platforms": ["linux-x64"], "worker": "bin/superfluid-worker-llamacpp", "tested": True,
        "abi": None, "chosen_by": "tested", "layout": layout}
    assert written["sources"] == [{"url": a["url"], "sha256": a["sha256"]} for a in p["assets"]]
    receipt = read_receipt(into / "runtime.json")
    assert receipt.version == BUILD[layout] and receipt.tested is True and receipt.installed_at
    # the loader accepts the installed library, and now names the build from the receipt
    check = worker("check", "--lib", into / "lib")
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["available"] is True and report["layout"] == layout
    assert report["runtime"]["version"] == f"llama.cpp {BUILD[layout]}"


def test_an_untested_plan_installs_a_library_of_a_known_layout_as_untested(libllama_v2: Path, tmp_path: Path) -> None:
    into = extracted(tmp_path / "staging", libllama_v2)
    p = verified(plan("--from", "/srv/llama-b11549-bin-ubuntu-x64.tar.gz", "--untested")["plans"][0])
    assert p["tested"] is False and "layout" not in p
    done = install(into, p)
    assert done.returncode == 0, done.stderr
    receipt = read_receipt(into / "runtime.json")
    assert (receipt.version, receipt.install, receipt.tested) == ("b11549", "b11549-cpu", False)
    assert json.loads(done.stdout)["layout"] == "v2"


def test_a_library_of_the_other_layout_than_the_plans_build_is_refused(libllama_v1: Path, tmp_path: Path) -> None:
    into = extracted(tmp_path / "staging", libllama_v1)
    done = install(into, verified(plan()["plans"][0]))  # b11642: v2
    assert done.returncode == 1 and done.stdout == ""
    assert "its library is laid out as v1, but llamacpp b11642 was tested as v2" in done.stderr
    assert not (into / "runtime.json").exists()


needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build stand-in libraries")


@needs_cc
def test_a_library_that_is_not_libllama_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    into = tmp_path / "staging"
    (into / "lib").mkdir(parents=True)
    src = tmp_path / "other.c"
    src.write_text("int answer(void) { return 42; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(into / "lib" / "libllama.so")], check=True)
    done = install(into, verified(plan()["plans"][0]))
    assert done.returncode == 1 and done.stdout == ""
    assert ("the staged library was refused by its check: libllama.so is a llama.cpp this "
            "adapter cannot drive: it has no llama_backend_init") in done.stderr
    assert str(into) not in done.stderr  # the staging folder is not named
    assert not (into / "runtime.json").exists()


@needs_cc
def test_an_unknown_layout_is_refused_even_for_an_untested_plan(tmp_path: Path) -> None:
    from tests.llamacpp.stubs import older_defaults, stub_library

    # the 2026-06-07 layout: n_threads at 24 where v1 has n_outputs_max_per_seq (see test_layout)
    into = tmp_path / "staging"
    (into / "lib").mkdir(parents=True)
    stub = stub_library(tmp_path, older_defaults(), L.default_image(L.LAYOUTS[1])[1][:80])
    shutil.copy(stub, into / "lib" / "libllama.so")
    p = verified(plan("--from", "/srv/llama-b11400-bin-ubuntu-x64.tar.gz", "--untested")["plans"][0])
    done = install(into, p)
    assert done.returncode == 1 and done.stdout == ""  # a refusal, not a crash (the stub aborts if driven)
    assert "its parameter structs are laid out as no tested build's are" in done.stderr
    assert "the staged library was refused by its check" in done.stderr and "layout" in done.stderr
    assert not (into / "runtime.json").exists()
    p["tested"] = True
    done = install(into, p)
    assert done.returncode == 1 and "--untested relaxes" not in done.stderr


def test_a_directory_without_libllama_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    done = install(tmp_path, verified(plan()["plans"][0]))
    assert done.returncode == 1
    assert (f"names the directory {tmp_path / 'lib'}, which holds neither libllama.so nor libllama.so.0"
            in done.stderr)
    assert not (tmp_path / "runtime.json").exists()


def _without(key: str) -> dict[str, Any]:
    p = verified(plan()["plans"][0])
    del p[key]
    return p


@pytest.mark.parametrize(("argv", "message"), [
    (["--into", "D"], "install needs --into and --plan"),
    (["--plan", "{}"], "install needs --into and --plan"),
    (["--into", "D", "--plan"], "--plan needs a value"),
    (["--into", "D", "--plan", "{}", "--force"], "unknown flag --force"),
    (["--into", "D", "--plan", "{x"], "--plan: not valid JSON (Expecting property name enclosed in double quotes: "
                                      "line 1 column 2 (char 1))"),
    (["--into", "D", "--plan", "[]"], "--plan: not a JSON object (it is a list)"),
    (["--into", "D", "--plan", '{"id": "basert"}'], '--plan: a plan for "basert" given to the llamacpp runtime'),
])
def test_a_bad_install_line_is_a_usage_error(argv: list[str], message: str, tmp_path: Path) -> None:
    done = worker("install", *[str(tmp_path) if a == "D" else a for a in argv])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"superfluid-worker-llamacpp: {message}\n"


def test_a_plan_missing_what_the_receipt_is_made_of_is_a_usage_error(libllama_v2: Path, tmp_path: Path) -> None:
    into = extracted(tmp_path / "staging", libllama_v2)
    for key in ("version", "backend", "install", "assets"):
        done = install(into, _without(key))
        assert done.returncode == 2 and f"--plan: {key!r} must be" in done.stderr, done.stderr
    bad_name = verified(plan()["plans"][0]) | {"install": "../escape"}
    done = install(into, bad_name)
    assert done.returncode == 2 and "'install' '../escape' is not 'b11642-cpu'" in done.stderr
    unverified = plan()["plans"][0]  # b11642's digest is null until the installer settles it
    done = install(into, unverified)
    assert done.returncode == 2
    assert ("assets[0] (llama-b11642-bin-ubuntu-x64.tar.gz) has no 'sha256' of 64 hexadecimal digits (it has null); "
            "the installer passes the digest it verified") in done.stderr
    nameless = verified(plan()["plans"][0])
    del nameless["assets"][0]["url"]
    assert "assets[0] has no 'url'" in install(into, nameless).stderr
    assert not (into / "runtime.json").exists()
