"""Shared helpers of the basert tests: where the reference engine is built, and its variants."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import cli
from tests.conftest import ROOT, native_cache

__all__ = ["ROOT", "ENGINE_DIR", "BUILD_SH", "LIB_NAME", "VARIANTS", "WORKER", "native_cache", "build_engines",
           "lib_path", "INCLUDE", "compile_and_run"]

ENGINE_DIR = ROOT / "tests" / "engines" / "basert"
INCLUDE = ROOT / "runtime" / "basert" / "include"  # our baseRT.h
BUILD_SH = ENGINE_DIR / "build.sh"
LIB_NAME = "libbaseRT.dylib" if sys.platform == "darwin" else "libbaseRT.so"
VARIANTS = ("0.2.6", "0.3.0", "0.3.1", "0.4.0", "0.5.0", "missing-symbol", "wrong-size")
WORKER = Path(cli.script("superfluid-worker-basert"))

if str(ENGINE_DIR) not in sys.path:
    sys.path.insert(0, str(ENGINE_DIR))  # make_model.py


def build_engines(cache: Path) -> subprocess.CompletedProcess[str]:
    """Run build.sh into ``cache`` (idempotent); the finished process."""
    env = {**os.environ, "SUPERFLUID_NATIVE_CACHE": str(cache), "PYTHON": sys.executable}
    return subprocess.run(["sh", str(BUILD_SH)], env=env, capture_output=True, text=True, timeout=300)


def lib_path(engines: Path, variant: str) -> Path:
    return engines / variant / LIB_NAME


def compile_and_run(tmp_path: Path, source: str) -> str:
    """Compile ``source`` against our header in ``tmp_path``, run it, and answer its stdout."""
    c = tmp_path / "probe.c"
    c.write_text(source)
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", f"-I{INCLUDE}", "-o", str(exe), str(c)],
                   check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
