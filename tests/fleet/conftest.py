"""Fixtures for the lock and fleet tests: baseRT and llama.cpp releases on the loopback server, a
static HTTP server for a mirror directory, and the real ``superfluid`` command in a working
directory with its own SUPERFLUID_HOME.

The releases: baseRT 0.2.6 … 0.5.0 of the reference engine for linux-x64 (0.4.0 also with a
``cuda`` bundle), and llama.cpp b11642 whose CPU, CUDA 13.4 (and its ``cudart-`` archive) and
Vulkan archives all hold the real v2 libllama (a CPU build: a GPU plan finds no device of its
backend, and falls back).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import cli
from tests.cli import Run
from tests.end_to_end import releases
from tests.release_server import ReleaseServer, sha256_line

BASERT = releases.REPO
LLAMA = "ggml-org/llama.cpp"
CUDA_BUNDLE = "basert-engine-linux-x64-cuda-0.4.0.tar.gz"
LLAMA_ASSETS = ("llama-b11642-bin-ubuntu-x64.tar.gz", "llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz",
                "cudart-llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz", "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz")
#: a plain linux-x64 machine, whatever this one is (the libraries are built for this one)
PLAIN = {"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64", "SUPERFLUID_HOST_NVIDIA_DRIVER": "none",
         "SUPERFLUID_HOST_CUDA_RUNTIME": "none", "SUPERFLUID_HOST_ROCM": "0", "SUPERFLUID_HOST_VULKAN": "0"}


@dataclass
class Machine:
    """A working directory and a SUPERFLUID_HOME: one machine of the fleet."""

    cwd: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def superfluid(self, *args: str, timeout: float = 120) -> Run:
        return cli.run("superfluid", *args, env=self.env, cwd=self.cwd, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return cli.start("superfluid", *args, env=self.env, cwd=self.cwd)

    def receipt(self, runtime: str, install: str) -> dict[str, Any]:
        return json.loads((self.home / "runtimes" / runtime / install / "runtime.json").read_text())

    def installs(self, runtime: str) -> list[str]:
        root = self.home / "runtimes" / runtime
        if not root.is_dir():
            return []
        return sorted(n for n in os.listdir(root) if not n.startswith(".") and n not in ("current", "pinned"))


def machine_at(base: Path, name: str, **env: str) -> Machine:
    cwd = base / name
    home = cwd / "sfhome"
    home.mkdir(parents=True)
    return Machine(cwd, home, cli.environment(home, **{**PLAIN, **env}))


def publish_fleet_releases(server: ReleaseServer, llama: bytes) -> None:
    releases.publish(server, platform="linux-x64")
    cuda = releases.bundle("0.4.0")
    server.add_asset(BASERT, "v0.4.0", CUDA_BUNDLE, cuda)
    server.add_asset(BASERT, "v0.4.0", CUDA_BUNDLE + ".sha256", sha256_line(CUDA_BUNDLE, cuda))
    server.add_release(LLAMA, "b11642", {name: llama for name in LLAMA_ASSETS})


@pytest.fixture
def fleet_server(release_server: ReleaseServer, engines: Path, libllama_v2: Path) -> ReleaseServer:
    """The loopback GitHub fake with the fleet's releases (fresh for each test: tests change them)."""
    publish_fleet_releases(release_server, releases.libllama_archive(libllama_v2))
    return release_server


@pytest.fixture
def admin(tmp_path: Path, fleet_server: ReleaseServer) -> Machine:
    """The machine that writes the lock: it reads the releases from the loopback 'GitHub'."""
    return machine_at(tmp_path, "admin", SUPERFLUID_GITHUB_API=fleet_server.url)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass


def static_server(root: Path) -> tuple[http.server.ThreadingHTTPServer, threading.Thread, str]:
    """A plain static HTTP server (``http.server``) for ``root`` on loopback, in a thread."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return httpd, thread, f"http://127.0.0.1:{httpd.server_address[1]}/"
