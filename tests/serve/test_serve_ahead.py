"""``superfluid serve`` starts the worker a line chose last ahead of its own decision (issue 45, item 3:
``superfluid.serve_ahead``), with the real libllama, a real GGUF model and the real worker.

A worker started ahead is a fork of its face (``superfluid.worker_fork``: its command line is the
face's, ``/proc/<pid>/cmdline``), or, spawned, has ``SUPERFLUID_PRIMED`` (``1``, or ``load``) in the
environment it was started with (``/proc/<pid>/environ``). A guess shaped as an install's launcher
(this superfluid's own, byte for byte) runs ``SUPERFLUID_PYTHON``, which a test points at a script that
logs its pid and whether it was primed, then execs the real interpreter: the log says what was
started, and ``/proc`` what still runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from superfluid.installer.home.launcher import launcher_script
from superfluid.runtime.kernel.lookup import GO, LOAD_FIRST
from superfluid.serve_ahead import FILE
from tests import cli
from tests.serving_client import SuperfluidServe, alive

pytestmark = pytest.mark.native


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in raw if entry)


def cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def forked(pid: int) -> bool:
    """Whether process ``pid`` is a fork of its parent that never exec'd (its command line is the parent's)."""
    return cmdline(pid) == cmdline(parent_of(pid))


def primed(pid: int) -> bool:
    """Whether process ``pid`` was started primed (ahead of its face's decision): forked from its face,
    or spawned with the variable that says so."""
    return forked(pid) or environ_of(pid).get("SUPERFLUID_PRIMED") in ("1", LOAD_FIRST)


def started(pid: int) -> str:
    """How worker ``pid`` was started: ``forked`` (a fork of its face, told what to be once it decided),
    ``ahead`` (the guess spawned primed) or ``after`` (spawned once the face decided)."""
    return "forked" if forked(pid) else "ahead" if primed(pid) else "after"


def logging_python(tmp_path: Path) -> tuple[Path, Path]:
    """An interpreter for ``SUPERFLUID_PYTHON`` that logs ``<pid> <primed>``, then becomes this Python."""
    log, python = tmp_path / "python.log", tmp_path / "logging-python"
    python.write_text(f"#!/bin/sh\nprintf '%s %s\\n' \"$$\" \"${{SUPERFLUID_PRIMED:-0}}\" >> '{log}'\n"
                      f"exec '{sys.executable}' \"$@\"\n")
    python.chmod(0o755)
    return python, log


def starts(log: Path) -> list[tuple[int, bool]]:
    """Each start the log holds: its pid and whether it was primed."""
    if not log.exists():
        return []
    return [(int(pid), flag == "1") for pid, flag in (ln.split() for ln in log.read_text().splitlines())]


def install_launcher(home: Path) -> Path:
    """This superfluid's own launcher, where an install's sits (no install around it: only a guess names it)."""
    launcher = home / "runtimes" / "llamacpp" / "b1-cpu" / "bin" / "superfluid-worker-llamacpp"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(launcher_script("llamacpp"))
    launcher.chmod(0o755)
    return launcher


def kept(home: Path) -> dict[str, list[str]]:
    workers: dict[str, list[str]] = json.loads((home / "cache" / FILE).read_text())["workers"]
    return workers


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (waits a little: the face reaps it as it finishes)."""
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


@dataclass(frozen=True)
class Line:
    """A serve line on the real worker beside superfluid, in a home of its own."""

    home: Path
    env: dict[str, str]
    argv: list[str]

    def serve_once(self, seen: dict[str, object] | None = None) -> tuple[int, str]:
        """Serve until one completion is answered, then stop: the worker's pid, and how it was started
        (``started``; ``seen``, given, gets its ``environ`` and its ``name``)."""
        s = SuperfluidServe(self.argv, self.env)
        try:
            assert s.complete(prompt="the cat", max_tokens=2)["usage"]["completion_tokens"] == 2
            (worker,) = s.children()
            how = started(worker)
            if seen is not None:
                seen.update(environ=environ_of(worker), name=Path(f"/proc/{worker}/comm").read_text().strip())
            code, _, err = s.stop()
            assert code == 0, err
            return worker, how
        finally:
            s.close()

    def guess(self, program: Path) -> None:
        """Make the kept guess of this line name ``program`` (a line served once keeps one)."""
        (key, argv), = kept(self.home).items()
        (self.home / "cache" / FILE).write_text(json.dumps({"format": 1, "workers": {key: [str(program), *argv[1:]]}}))


def a_line(tmp_path: Path, model: Path, lib: Path, **env: str) -> Line:
    home = tmp_path / "home"
    return Line(home, cli.environment(home, **env),
                [str(cli.script("superfluid")), "serve", "--port", "0", "--model", str(model),
                 "--llamacpp-lib", str(lib)])


def test_the_worker_beside_superfluid_runs_in_a_fork_of_its_face_guessed_or_not(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    _, first = line.serve_once()
    assert first == "forked"  # nothing kept yet: the fork imported the shared serving stack meanwhile
    (guess,) = kept(line.home).values()
    assert guess[:2] == [str(cli.script("superfluid-worker-llamacpp")), "serve"]
    seen: dict[str, object] = {}
    _, second = line.serve_once(seen)
    assert second == "forked"  # the guess named its runtime: the fork imported that worker's serve path
    assert seen["name"] == "superfluid-work"  # named in ps as its script would be (15 characters)
    environ = seen["environ"]  # what /proc keeps is the face's: the worker's own is the one it was told
    assert list(kept(line.home).values()) == [guess]  # the guess was right: nothing new kept
    assert isinstance(environ, dict) and "SUPERFLUID_PRIMED" not in environ


def test_a_worker_ahead_is_spawned_when_the_face_holds_a_credential(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    """A fork would keep the face's environment in its memory; a spawned worker gets it scrubbed."""
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2, HF_TOKEN="hf_not_a_real_one")
    assert line.serve_once()[1] == "after"  # no fork, and nothing guessed yet
    seen: dict[str, object] = {}
    _, how = line.serve_once(seen)
    assert how == "ahead"  # the guess, spawned primed
    environ = seen["environ"]
    assert isinstance(environ, dict) and "HF_TOKEN" not in environ
    assert environ.get("SUPERFLUID_PRIMED") == LOAD_FIRST  # its library named, unchanged since: loaded first


def test_a_worker_started_ahead_dies_with_its_face(libllama_v2: Path, gguf_models: dict[str, Path],
                                                  tmp_path: Path) -> None:
    """Started ahead it was spawned without a parent-death signal (no fork of the face); told to go, it
    sets its own: the face killed outright, the kernel stops the worker."""
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    line.serve_once()
    s = SuperfluidServe(line.argv, line.env)
    try:
        (worker,) = s.children()
        assert primed(worker)
        s.proc.kill()
        s.proc.wait(timeout=30)
        assert gone(worker), "the worker outlived its face"
    finally:
        s.close()


def test_a_guess_that_is_not_the_worker_chosen_is_stopped_and_the_chosen_one_serves(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    python, log = logging_python(tmp_path)
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2, SUPERFLUID_PYTHON=str(python))
    line.serve_once()
    guess = kept(line.home)
    line.guess(install_launcher(line.home))  # a worker the face could choose, not the one it will
    worker, how = line.serve_once()
    ((stale, flag),) = starts(log)
    assert flag and gone(stale), "the launcher guessed was started primed, and stopped"
    assert how == "after" and worker != stale  # the chosen one served, started as before
    assert kept(line.home) == guess  # and is the guess again


def test_a_changed_launcher_is_never_started_ahead(libllama_v2: Path, gguf_models: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """An install's launcher runs before its install is judged only when it is this superfluid's own."""
    python, log = logging_python(tmp_path)
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2, SUPERFLUID_PYTHON=str(python))
    line.serve_once()
    launcher = install_launcher(line.home)
    launcher.write_text(launcher.read_text().replace("import os, sys", "import os, sys  # changed"))
    line.guess(launcher)
    _, how = line.serve_once()
    assert starts(log) == [] and how == "forked"  # not started: a waiting fork became the worker chosen


def test_a_guess_naming_a_program_the_face_would_never_choose_is_not_started(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    line.serve_once()
    planted, ran = tmp_path / "elsewhere" / "superfluid-worker-llamacpp", tmp_path / "it-ran"
    planted.parent.mkdir()
    planted.write_text(f"#!/bin/sh\ntouch '{ran}'\n")
    planted.chmod(0o755)
    line.guess(planted)
    _, how = line.serve_once()
    assert not ran.exists(), "a cache file named a program, and it ran"
    assert how == "forked"


def test_a_worker_named_by_the_variable_is_not_started_ahead(libllama_v2: Path, gguf_models: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """``SUPERFLUID_WORKER_<ID>`` names anyone's worker, which may not wait for the word to go."""
    mine = tmp_path / "my-worker"
    mine.write_text(f"#!/bin/sh\nexec '{cli.script('superfluid-worker-llamacpp')}' \"$@\"\n")
    mine.chmod(0o755)
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2, SUPERFLUID_WORKER_LLAMACPP=str(mine))
    line.serve_once()
    _, how = line.serve_once()
    assert how == "after"  # the fork was not that worker: stopped, and the one named started


def test_a_line_refused_after_its_worker_started_ahead_leaves_nothing_running(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    python, log = logging_python(tmp_path)
    model = tmp_path / "model.gguf"
    model.write_bytes(gguf_models["always-the.gguf"].read_bytes())
    line = a_line(tmp_path, model, libllama_v2, SUPERFLUID_PYTHON=str(python))
    line.serve_once()
    line.guess(install_launcher(line.home))
    before = (line.home / "cache" / FILE).read_bytes()
    model.unlink()
    done = cli.run(*line.argv, env=line.env, timeout=60)
    assert done.code == 2 and str(model) in done.stderr and "no such file or directory" in done.stderr, done.stderr
    ((pid, flag),) = starts(log)
    assert flag and gone(pid)
    assert (line.home / "cache" / FILE).read_bytes() == before


def running(argv: list[str]) -> list[int]:
    """The processes whose command line is ``argv`` run by this Python (a face, or a fork of one)."""
    want = [os.fsencode(a) for a in [sys.executable, *argv]] + [b""]
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and cmdline(int(entry))[1:] == want[1:]:
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_line_refused_while_its_fork_waited_leaves_nothing_running(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    line = a_line(tmp_path, model, libllama_v2)
    done = cli.run(*line.argv, env=line.env, timeout=60)
    assert done.code == 2 and str(model) in done.stderr, done.stderr
    assert running(line.argv) == []
    assert not (line.home / "cache" / FILE).exists()  # nothing chosen: nothing kept


@pytest.mark.parametrize("garbage", [b"", b"{", b"[]", b'{"format": 1, "workers": {"k": "not a list"}}',
                                     b'{"format": 9, "workers": {}}'], ids=["empty", "cut", "list", "value", "format"])
def test_a_garbled_file_of_guesses_is_no_guess(libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path,
                                               garbage: bytes) -> None:
    line = a_line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    (line.home / "cache").mkdir(parents=True)
    (line.home / "cache" / FILE).write_bytes(garbage)
    _, how = line.serve_once()
    assert how == "forked"  # no guess: the fork imported the shared serving stack
    assert list(kept(line.home).values())[0][0] == str(cli.script("superfluid-worker-llamacpp"))


def _primed_serve(stdin: bytes, model: Path, lib: Path, primed: str = "1") -> subprocess.CompletedProcess[bytes]:
    env = {**cli.environment(), "SUPERFLUID_PRIMED": primed}
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


def test_a_serve_worker_primed_to_load_first_loads_then_binds_only_when_told_to_go(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    """``SUPERFLUID_PRIMED=load``: its engine loads before the word (a missing model fails at once, exit 3,
    though nothing said go); never told, it closes the engine and exits 0 having bound nothing."""
    done = _primed_serve(b"", tmp_path / "missing.gguf", libllama_v2, primed=LOAD_FIRST)
    assert done.returncode == 3 and b"does not exist" in done.stderr, done.stderr
    for said in (b"", b"no\n"):
        done = _primed_serve(said, gguf_models["always-the.gguf"], libllama_v2, primed=LOAD_FIRST)
        assert (done.returncode, done.stdout) == (0, b""), (said, done.stderr)
