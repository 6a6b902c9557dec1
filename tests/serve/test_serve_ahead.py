"""``superfluid serve`` starts the worker a line chose last ahead of its own decision (issue 45, item 3:
``superfluid.serve_ahead``), with the real libllama, a real GGUF model and the real worker.

A worker named by ``SUPERFLUID_WORKER_LLAMACPP`` logs its pid, whether it was started primed and its
command line, then execs the real one (the same pid): the log says what was started, and ``/proc``
what is still running.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from superfluid.runtime.kernel.lookup import GO
from superfluid.serve_ahead import FILE
from tests import cli
from tests.serving_client import SuperfluidServe, alive

pytestmark = pytest.mark.native


def logging_worker(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A worker that logs ``<pid> <primed> <argv>``, then becomes the real llama.cpp worker."""
    log, worker = tmp_path / f"{name}.log", tmp_path / name
    worker.write_text(f"#!/bin/sh\nprintf '%s %s %s\\n' \"$$\" \"${{SUPERFLUID_PRIMED:-0}}\" \"$*\" >> '{log}'\n"
                      f"exec '{cli.script('superfluid-worker-llamacpp')}' \"$@\"\n")
    worker.chmod(0o755)
    return worker, log


def starts(log: Path) -> list[tuple[int, bool]]:
    """Each start the log holds: its pid and whether it was primed."""
    if not log.exists():
        return []
    return [(int(pid), primed == "1") for pid, primed, _ in (ln.split(" ", 2) for ln in log.read_text().splitlines())]


def line(model: Path, lib: Path) -> list[str]:
    return [str(cli.script("superfluid")), "serve", "--port", "0", "--model", str(model), "--llamacpp-lib", str(lib)]


def kept(home: Path) -> dict[str, list[str]]:
    workers: dict[str, list[str]] = json.loads((home / "cache" / FILE).read_text())["workers"]
    return workers


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (waits a little: the face reaps it as it finishes)."""
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def served_once(argv: list[str], env: dict[str, str]) -> tuple[int, list[int]]:
    """Serve ``argv`` until one completion is answered, then stop it: the exit code and the face's children."""
    s = SuperfluidServe(argv, env)
    try:
        assert s.complete(prompt="the cat", max_tokens=2)["usage"]["completion_tokens"] == 2
        children = s.children()
        code, _, err = s.stop()
        assert code == 0, err
        return code, children
    finally:
        s.close()


@dataclass(frozen=True)
class Served:
    """A line served once in a fresh home, by a logging worker that ``SUPERFLUID_WORKER_LLAMACPP`` names."""

    worker: Path
    log: Path
    home: Path
    env: dict[str, str]
    argv: list[str]


def served_before(tmp_path: Path, model: Path, lib: Path) -> Served:
    worker, log = logging_worker(tmp_path, "worker")
    home = tmp_path / "home"
    s = Served(worker, log, home, cli.environment(home, SUPERFLUID_WORKER_LLAMACPP=str(worker)), line(model, lib))
    served_once(s.argv, s.env)
    return s


def test_a_line_served_before_starts_its_worker_ahead_and_serves_with_it(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    s = served_before(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    worker, log, home, env, argv = s.worker, s.log, s.home, s.env, s.argv
    assert [primed for _, primed in starts(log)] == [False]  # nothing kept yet: started once it was chosen
    (guess,) = kept(home).values()
    assert guess[0] == str(worker) and guess[1] == "serve"
    _, children = served_once(argv, env)
    second = starts(log)[1:]
    assert [primed for _, primed in second] == [True]  # one worker, started ahead, and it served
    assert children == [second[0][0]]
    assert len(kept(home)) == 1  # the guess was right: nothing new kept


def test_a_worker_started_ahead_dies_with_its_face(libllama_v2: Path, gguf_models: dict[str, Path],
                                                  tmp_path: Path) -> None:
    """Started ahead it was spawned without a parent-death signal (no fork of the face); told to go, it
    sets its own: the face killed outright, the kernel stops the worker."""
    before = served_before(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    s = SuperfluidServe(before.argv, before.env)
    try:
        ((pid, primed),) = starts(before.log)[1:]
        assert primed and s.children() == [pid]
        s.proc.kill()
        s.proc.wait(timeout=30)
        assert gone(pid), "the worker outlived its face"
    finally:
        s.close()


def test_a_guess_that_is_not_the_worker_chosen_is_stopped_and_the_chosen_one_serves(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    s = served_before(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    log, home, env, argv = s.log, s.home, s.env, s.argv
    launcher = home / "runtimes" / "llamacpp" / "b1-cpu" / "bin"  # shaped as an install's: a worker it could choose
    launcher.mkdir(parents=True)
    other, other_log = logging_worker(launcher, "superfluid-worker-llamacpp")
    (key, guess), = kept(home).items()
    (home / "cache" / FILE).write_text(json.dumps({"format": 1, "workers": {key: [str(other), *guess[1:]]}}))
    _, children = served_once(argv, env)
    ((stale, primed),) = starts(other_log)
    assert primed and gone(stale), "the worker guessed was started primed, and stopped"
    assert [p for p, _ in starts(log)[1:]] == children  # the chosen one served, started as before
    assert kept(home) == {key: guess}  # and is the guess now


def test_a_line_refused_after_its_worker_started_ahead_leaves_nothing_running(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    worker, log = logging_worker(tmp_path, "worker")
    home = tmp_path / "home"
    model = tmp_path / "model.gguf"
    model.write_bytes(gguf_models["always-the.gguf"].read_bytes())
    env = cli.environment(home, SUPERFLUID_WORKER_LLAMACPP=str(worker))
    argv = line(model, libllama_v2)
    served_once(argv, env)
    before = (home / "cache" / FILE).read_bytes()
    model.unlink()
    done = cli.run(*argv, env=env, timeout=60)
    assert done.code == 2 and f"{model}" in done.stderr and "no such file or directory" in done.stderr, done.stderr
    ((pid, primed),) = starts(log)[1:]
    assert primed and gone(pid)
    assert (home / "cache" / FILE).read_bytes() == before


def test_a_guess_naming_a_program_the_face_would_never_choose_is_not_started(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    s = served_before(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    log, home, env, argv = s.log, s.home, s.env, s.argv
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted, planted_log = logging_worker(elsewhere, "superfluid-worker-llamacpp")
    (key, guess), = kept(home).items()
    (home / "cache" / FILE).write_text(json.dumps({"format": 1, "workers": {key: [str(planted), *guess[1:]]}}))
    served_once(argv, env)
    assert starts(planted_log) == [], "a cache file named a program, and it ran"
    assert [primed for _, primed in starts(log)] == [False, False]


@pytest.mark.parametrize("garbage", [b"", b"{", b"[]", b'{"format": 1, "workers": {"k": "not a list"}}',
                                     b'{"format": 9, "workers": {}}'], ids=["empty", "cut", "list", "value", "format"])
def test_a_garbled_file_of_guesses_is_no_guess(libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path,
                                               garbage: bytes) -> None:
    worker, log = logging_worker(tmp_path, "worker")
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / FILE).write_bytes(garbage)
    env = cli.environment(home, SUPERFLUID_WORKER_LLAMACPP=str(worker))
    served_once(line(gguf_models["always-the.gguf"], libllama_v2), env)
    assert [primed for _, primed in starts(log)] == [False]
    assert list(kept(home).values())[0][0] == str(worker)


def _primed_serve(stdin: bytes, model: Path, lib: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**cli.environment(), "SUPERFLUID_PRIMED": "1"}
    return subprocess.run([str(cli.script("superfluid-worker-llamacpp")), "serve", "--model", str(model),
                           "--llamacpp-lib", str(lib), "--port", "0"], input=stdin, env=env, capture_output=True,
                          timeout=60, check=False)


def test_a_primed_serve_worker_never_told_to_go_loads_nothing_and_exits_0(libllama_v2: Path,
                                                                           tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    for said in (b"", b"no\n", GO.upper()):
        done = _primed_serve(said, missing, libllama_v2)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), said


def test_a_primed_serve_worker_told_to_go_serves_as_started_plainly(libllama_v2: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    done = _primed_serve(GO, missing, libllama_v2)
    assert done.returncode == 3 and b"does not exist" in done.stderr, done.stderr  # it went on to load the model
    assert os.path.basename(str(missing)).encode() in done.stderr
