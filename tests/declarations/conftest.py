"""Helpers for the declaration tests: run the real CLI, write fake workers, fixed host facts."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

from tests import cli

SUPERFLUID = Path(cli.script("superfluid"))

#: a plain Linux x64 host: no NVIDIA driver, no CUDA runtime, no ROCm, no Vulkan
LINUX_X64 = {"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64", "SUPERFLUID_HOST_NVIDIA_DRIVER": "none",
             "SUPERFLUID_HOST_CUDA_RUNTIME": "none", "SUPERFLUID_HOST_ROCM": "0", "SUPERFLUID_HOST_VULKAN": "0"}
MACOS_ARM64 = dict(LINUX_X64, SUPERFLUID_HOST_OS="macos", SUPERFLUID_HOST_ARCH="arm64")


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """A test run's environment (no worker override, no library named), with a fresh SUPERFLUID_HOME
    and host."""
    return cli.environment(home, **{**LINUX_X64, **extra})


def sf(env: dict[str, str], *args: str, exe: str | Path = SUPERFLUID, timeout: float = 60) -> cli.Run:
    """Run the real ``superfluid`` command as a subprocess."""
    return cli.run(exe, *args, env=env, timeout=timeout)


def sf_json(env: dict[str, str], *args: str) -> Any:
    done = sf(env, *args)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


def fake_worker(path: Path, body: str) -> Path:
    """An executable Python script at ``path``: ``body`` runs with ``args`` = its command line."""
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def validate(doc: Any, name: str) -> None:
    from superfluid.runtime.kernel.schema import errors

    found = errors(doc, name)
    assert not found, found


def version_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """An adapter's ``versions`` rows, valid against the ``versions`` schema, by version."""
    validate(rows, "versions")
    return {r["version"]: r for r in rows}


#: the llama.cpp options SPEC §7 names, in its order
SPEC_LLAMA_OPTIONS = [
    "n-gpu-layers", "main-gpu", "split-mode", "tensor-split", "load-mode", "lazy-mode", "repack", "parallel", "threads",
    "threads-batch", "batch-size", "ubatch-size", "flash-attn", "cache-type-k", "cache-type-v", "kv-offload",
    "op-offload", "swa-full", "rope-scaling", "rope-freq-base", "rope-freq-scale", "yarn-ext-factor",
    "yarn-attn-factor", "yarn-beta-fast", "yarn-beta-slow", "yarn-orig-ctx", "lib",
]


def empty_home_env(home: Path, host: dict[str, str]) -> dict[str, str]:
    """Nothing installed and nothing named: no library, no MLX environment, no worker override."""
    env = base_env(home, **host)
    for name in ("SUPERFLUID_LLAMA_LIB", "SUPERFLUID_MLX_VENV", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env
