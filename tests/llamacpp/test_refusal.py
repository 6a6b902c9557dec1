"""Libraries we must not drive are refused with a clear message, before any call that takes a struct.

Each case runs the real worker (``check``) in a child process, so a crash would show as a signal
exit, not as a refusal. The stand-in libraries are compiled here with ``cc``: every function the
adapter binds is exported, the default-params getters return a chosen byte image, and every other
function calls ``abort()`` — so a loader that called one before refusing would crash the child.
"""

from __future__ import annotations

import ctypes as C
import ctypes.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from superfluid.runtime.llamacpp import bindings
from superfluid.runtime.llamacpp import layout as L
from tests import cli
from tests.conftest import ROOT
from tests.llamacpp.stubs import older_defaults, stub_library

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build stand-in libraries")


def check(lib: Path) -> tuple[int, dict[str, object], str]:
    env = cli.environment()
    done = subprocess.run([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", "check", "--lib", str(lib)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode >= 0, f"the worker died of signal {-done.returncode}: {done.stderr[-1500:]}"
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, report, done.stderr


def test_a_library_that_is_not_libllama_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "other.c"
    src.write_text("int answer(void) { return 42; }\n")
    lib = tmp_path / "libother.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    code, report, _ = check(lib)
    assert code == 1
    assert report["available"] == (
        f"{lib} is a llama.cpp this adapter cannot drive: it has no llama_backend_init "
        f"(nor {len(bindings.REQUIRED) - 1} other functions it calls)")
    assert report["fixes"][0]["does"] == "installs a build this adapter lists as tested"  # a value
    assert report["runtime"]["version"] is None


def test_a_system_library_is_refused_without_a_crash(tmp_path: Path) -> None:
    libz = C.util.find_library("z")
    if libz is None:
        pytest.skip("no libz on this system")
    path = next((p for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                             "/usr/lib/aarch64-linux-gnu", "/usr/lib") if (p := Path(d) / libz).exists()), None)
    if path is None:
        pytest.skip(f"{libz} not found in the usual directories")
    code, report, _ = check(path)
    assert code == 1 and "it has no llama_backend_init" in str(report["available"])


def test_a_file_that_is_no_library_at_all_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "libllama.so"
    fake.write_bytes(b"not an ELF file")
    code, report, _ = check(fake)
    assert code == 1 and str(report["available"]).startswith(f"could not load {fake}")


def test_a_library_lacking_one_function_is_refused_naming_it(tmp_path: Path) -> None:
    lib = stub_library(tmp_path, *L.default_image(L.LAYOUTS[1]), omit=("ggml_row_size",))
    code, report, _ = check(lib)
    assert code == 1
    assert str(report["available"]) == f"{lib} is a llama.cpp this adapter cannot drive: it has no ggml_row_size"
    assert [f["argv"] for f in report["fixes"]] == [["superfluid", "runtime", "install", "llamacpp"]]


def test_an_unknown_layout_is_refused_naming_field_found_and_expected(tmp_path: Path) -> None:
    # the 2026-06-07 layout: 160 bytes like v1, but n_threads at 24 where v1 has n_outputs_max_per_seq
    model = L.default_image(L.LAYOUTS[1])[1][:80]
    lib = stub_library(tmp_path, older_defaults(), model)
    code, report, _ = check(lib)
    assert code == 1  # and no crash: llama_backend_init (abort()) was never called
    why = str(report["available"])
    assert why.startswith(f"{lib} is a llama.cpp this adapter cannot drive: its parameter structs are laid out "
                          "as no tested build's are (")
    assert "n_outputs_max_per_seq (at byte 24) defaults to 4 where a tested build's is 1" in why
    assert "read as layout v1 of b11284" in why


def test_a_stub_with_tested_defaults_is_accepted_up_to_the_first_real_call(tmp_path: Path) -> None:
    # the control: the same stub with v2's defaults passes detection, then dies in llama_backend_init
    # (abort), which proves the refusals above happened before it
    context, model = L.default_image(L.LAYOUTS[0])
    lib = stub_library(tmp_path, context[:168], model[:80])
    env = cli.environment()
    done = subprocess.run([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", "check", "--lib", str(lib)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode < 0  # killed by SIGABRT from the stub's llama_backend_init
