"""``superfluid.worker_fork``: which workers may run in a fork of the face, and a waiting fork told the
worker to be, used as a spawned worker is (its pipes, its exit, its environment), with the real worker
beside superfluid and the real libllama. The tests fork the test process itself, as the face would."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from superfluid.worker_fork import Forked, fork_waiting, may_fork, preloads, runs_here
from tests import cli
from tests.serving_client import alive

pytestmark = [pytest.mark.native, pytest.mark.usefixtures("as_the_face")]


def worker() -> str:
    return str(cli.script("superfluid-worker-llamacpp"))


def finished(proc: Forked) -> tuple[int, bytes, bytes]:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    return proc.wait(), out, err


def ordered(argv: list[str], env: dict[str, str], preload: list[str] | None = None) -> Forked:
    proc = fork_waiting(preloads("llamacpp") if preload is None else preload)
    proc.order(argv, env)
    return proc


@pytest.mark.usefixtures("no_other_thread")
def test_the_worker_beside_superfluid_runs_in_a_fork() -> None:
    assert runs_here([worker(), "serve"]) == "llamacpp"
    assert may_fork({"PATH": "/usr/bin", "SUPERFLUID_HOME": "/tmp/h"})


def script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "superfluid-worker-llamacpp"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_a_program_not_beside_superfluid_is_not_run_in_a_fork(tmp_path: Path) -> None:
    """The same text elsewhere, or another name: a program the face did not ship beside itself."""
    assert runs_here([script(tmp_path, Path(worker()).read_text()), "serve"]) is None
    assert runs_here([str(cli.script("superfluid")), "serve"]) is None
    assert runs_here([]) is None


@pytest.mark.parametrize("name, value", [("HF_TOKEN", "x"), ("MIRROR", "https://user:pass@mirror.example/")])
def test_a_face_holding_a_credential_does_not_fork(name: str, value: str) -> None:
    """A fork keeps the face's environment in its memory; a spawned worker gets it scrubbed."""
    assert not may_fork({"PATH": "/usr/bin", name: value})


def test_a_worker_script_for_another_interpreter_or_module_is_not_run_in_a_fork(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the script beside superfluid would not run this interpreter on the worker's own module."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setattr(sys, "argv", [str(bindir / "superfluid")])
    text = Path(worker()).read_text()
    path = bindir / "superfluid-worker-llamacpp"
    for changed, rid in ((text, "llamacpp"), (text.replace(sys.executable, "/usr/bin/python3", 1), None),
                         (text.replace("superfluid.runtime.llamacpp.worker", "elsewhere"), None)):
        path.write_text(changed)
        assert runs_here([str(path), "serve"]) == rid, changed[:200]


def test_a_face_running_a_thread_does_not_fork() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not may_fork({})
    finally:
        stop.set()
        thread.join()


def test_a_waiting_fork_imports_the_serve_path_of_the_runtime_guessed() -> None:
    assert preloads("llamacpp") == ["superfluid.runtime.llamacpp.worker", "superfluid.runtime.llamacpp.serve"]
    assert preloads(None) == ["superfluid.runtime.worker", "superfluid.runtime.serving.http"]


def test_a_forked_worker_gets_the_environment_and_command_line_ordered(libllama_v2: Path) -> None:
    """``version`` finds libllama only through the variable the order's environment has (this process
    has it not); its exit code and output come back as a spawned worker's would."""
    assert "SUPERFLUID_LLAMA_LIB" not in os.environ
    env = {**cli.environment(), "SUPERFLUID_LLAMA_LIB": str(libllama_v2)}
    code, out, err = finished(ordered([worker(), "version"], env))
    assert (code, err) == (0, b"") and out.startswith(b"llama.cpp "), (out, err)
    code, out, err = finished(ordered([worker(), "version"], cli.environment(), preload=[]))
    assert code == 1 and out == b"" and b"libllama" in err, err


def test_a_waiting_fork_never_ordered_loads_nothing_and_is_stopped_as_a_spawned_one(tmp_path: Path) -> None:
    waiting = fork_waiting(preloads("llamacpp"))
    assert waiting.poll() is None and waiting.returncode is None  # importing, or waiting for its order
    waiting.kill()
    assert waiting.wait() == -signal.SIGKILL and waiting.poll() == -signal.SIGKILL
    finished(waiting)
    for said in (b"", b"go\n", b"{}\n", b'{"argv": [], "env": {}}\n', b'{"argv": ["x"], "env": {"a": 1}}\n',
                 b'{"argv": ["/bin/sh", "-c", "echo ran"], "env": {}}\n'):
        told = fork_waiting(preloads(None))
        assert told.stdin is not None
        told.stdin.write(said)
        assert finished(told) == (0, b"", b""), said  # not an order: it ends, having loaded nothing


def test_a_forked_worker_serves_and_dies_with_its_face(tmp_path: Path, libllama_v2: Path,
                                                       gguf_models: dict[str, Path]) -> None:
    """Told its order, it sets its own parent-death signal: the face killed outright, the kernel stops it.
    The face here is a child of the test, which forks and orders as ``superfluid serve`` does."""
    face = subprocess.Popen([sys.executable, "-c", _FACE, worker(), str(gguf_models["always-the.gguf"]),
                             str(libllama_v2)], stdout=subprocess.PIPE, env=cli.environment())
    try:
        assert face.stdout is not None
        pid, _, line = face.stdout.readline().partition(b" ")
        assert b'"listening"' in line, line
        assert Path(f"/proc/{int(pid)}/comm").read_text().strip() == "superfluid-work"
        face.kill()
        face.wait(timeout=30)
        deadline = time.monotonic() + 10
        while alive(int(pid)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(int(pid)), "the forked worker outlived its face"
    finally:
        if face.poll() is None:
            face.kill()
            face.wait()


_FACE = """
import os, sys
from superfluid.worker_fork import fork_waiting, preloads
worker, model, lib = sys.argv[1:]
proc = fork_waiting(preloads("llamacpp"))
proc.order([worker, "serve", "--model", model, "--llamacpp-lib", lib, "--port", "0"], dict(os.environ))
line = proc.stdout.readline()
sys.stdout.buffer.write(str(proc.pid).encode() + b" " + line)
sys.stdout.flush()
proc.wait()
"""


_REAL_CDLL = ctypes.CDLL


class _Libc:
    """libc as the fork sees it, writing each ``mallopt`` asked of it to a file (the limit a fork sets
    in its own malloc is seen nowhere else: its environment in /proc is the face's)."""

    def __init__(self, log: Path) -> None:
        self.log, self.real = log, _REAL_CDLL(None)

    def mallopt(self, param: int, value: int) -> int:
        with self.log.open("a") as f:
            f.write(f"{param} {value}\n")
        return int(self.real.mallopt(param, value))

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def test_a_forked_worker_limits_its_malloc_arenas_as_its_environment_says(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "mallopt.log"
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: _Libc(log) if name is None else _REAL_CDLL(name, *a, **k))
    for value, said in (("2", "-8 2\n"), ("", "")):
        log.write_text("")
        env = {**cli.environment(), "MALLOC_ARENA_MAX": value}
        finished(ordered([worker(), "version"], env, preload=[]))
        assert log.read_text() == said
