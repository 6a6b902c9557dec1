"""``superfluid serve``'s start (issue 45, item 3), with the real libllama and a real GGUF model.

- The worker is the one process started before the port answers: the runtime's check is not asked
  first (the worker's own start loads and judges the library, as the check would); it is asked after,
  only to say why a worker failed (exit 4, its words) or who named the library the worker announces.
  A worker named by ``SUPERFLUID_WORKER_LLAMACPP`` that logs each command line, then runs the real
  one, shows what was started and in which order.
- The model is opened by the worker alone: no other process of the tree maps it or holds it open.
- The worker holds two malloc arenas (``MALLOC_ARENA_MAX=2``) unless the caller sets its own bound.
- With no check answer to validate, a fresh home's ``superfluid serve`` imports no schema library.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests import cli
from tests.serving_client import SuperfluidServe, children_of

pytestmark = pytest.mark.native


def logged_worker(tmp_path: Path) -> tuple[Path, Path]:
    """A worker that appends its command line to a log, then runs the real llama.cpp worker."""
    log, worker = tmp_path / "started", tmp_path / "logged-worker"
    worker.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\nexec '{cli.script('superfluid-worker-llamacpp')}' "
                      "\"$@\"\n")
    worker.chmod(0o755)
    return worker, log


def started(log: Path) -> list[str]:
    """The worker commands the log holds, in order (``serve``, ``check``)."""
    return [line.split(" ", 1)[0] for line in log.read_text().splitlines()] if log.exists() else []


def serve(env: dict[str, str], model: Path, *args: str | Path) -> SuperfluidServe:
    return SuperfluidServe([cli.script("superfluid"), "serve", "--port", "0", "--model", str(model), *map(str, args)],
                           env)


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children_of(found[-1])
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in raw if entry)


def opens(pid: int, path: Path) -> list[str]:
    """How process ``pid`` holds the file ``path``: its mappings of it and its descriptors open on it."""
    real = str(path.resolve())
    maps = [line for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if line.endswith(" " + real)]
    fds = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == real:
                fds.append(f"fd {fd.name}")
        except OSError:
            continue  # closed while listed
    return maps + fds


def test_the_worker_is_the_one_process_started_before_the_port_answers(libllama_v2: Path,
                                                                       gguf_models: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    worker, log = logged_worker(tmp_path)
    env = cli.environment(tmp_path / "home", SUPERFLUID_WORKER_LLAMACPP=str(worker), MALLOC_ARENA_MAX="3")
    s = serve(env, gguf_models["always-the.gguf"], "--llamacpp-lib", libllama_v2)
    try:
        assert s.ready["where"] == f"library: {libllama_v2 / 'libllama.so'}, named by --llamacpp-lib"
        assert s.complete(prompt="Once upon a time", max_tokens=2)["choices"][0]["text"] == " the the"
        assert started(log) == ["serve"], "a process other than the worker was started before it served"
        (child,) = s.children()
        assert environ_of(child)["MALLOC_ARENA_MAX"] == "3"  # the caller's bound is kept
        code, _, err = s.stop()
        assert code == 0, err
    finally:
        s.close()


def test_a_library_the_variable_names_is_said_after_the_worker_serves(libllama_v2: Path,
                                                                      gguf_models: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    """Only the check knows who named the library the worker found: it is asked once the worker serves."""
    worker, log = logged_worker(tmp_path)
    env = cli.environment(tmp_path / "home", SUPERFLUID_WORKER_LLAMACPP=str(worker),
                          SUPERFLUID_LLAMA_LIB=str(libllama_v2))
    s = serve(env, gguf_models["always-the.gguf"])
    try:
        assert s.ready["where"] == f"library: {libllama_v2 / 'libllama.so'}, named by SUPERFLUID_LLAMA_LIB"
        assert started(log) == ["serve", "check"]
        code, _, err = s.stop()
        assert code == 0, err
    finally:
        s.close()


def test_a_worker_that_fails_to_start_is_explained_by_the_check(gguf_models: dict[str, Path], tmp_path: Path) -> None:
    """The refusal a check gives before the worker started, word for word and with exit 4, given after it."""
    worker, log = logged_worker(tmp_path)
    home, missing = tmp_path / "home", tmp_path / "no-such-lib"
    done = cli.run("superfluid", "serve", "--port", "0", "--model", gguf_models["always-the.gguf"], "--llamacpp-lib",
                   missing, env=cli.environment(home, SUPERFLUID_WORKER_LLAMACPP=str(worker)), timeout=60)
    assert done.code == 4, done.stderr
    assert done.stderr.startswith(f"superfluid: --llamacpp-lib names {missing}, which does not exist: name one with "
                                  "--llamacpp-lib or SUPERFLUID_LLAMA_LIB; or `superfluid runtime install llamacpp` "
                                  "installs it"), done.stderr
    assert done.stdout == "" and started(log) == ["serve", "check"]


@pytest.mark.parametrize("started", ["forked", "spawned"])
def test_no_process_but_the_worker_maps_or_opens_the_model(started: str, libllama_v2: Path,
                                                           gguf_models: dict[str, Path], tmp_path: Path) -> None:
    """Whether its worker is a fork of the face (``worker_fork``) or spawned (the face holds a credential:
    a fork would keep it), the face never opens the model; a spawned worker is told ``MALLOC_ARENA_MAX``
    (a fork sets the same limit itself: ``test_worker_fork``)."""
    model = gguf_models["tiny-f32.gguf"]
    env = cli.environment(tmp_path / "home", **({"HF_TOKEN": "hf_not_a_real_one"} if started == "spawned" else {}))
    env.pop("MALLOC_ARENA_MAX", None)
    s = serve(env, model, "--llamacpp-lib", libllama_v2)
    try:
        assert s.complete(prompt="the cat", max_tokens=1)["usage"]["completion_tokens"] == 1
        (worker,) = s.children()
        assert opens(worker, model), "the worker does not map the model: this test would see nothing"
        for pid in tree(s.proc.pid):
            if pid != worker:
                assert opens(pid, model) == [], f"process {pid} ({Path(f'/proc/{pid}/cmdline').read_text()!r})"
        command = Path(f"/proc/{worker}/cmdline").read_bytes()
        assert (command == Path(f"/proc/{s.proc.pid}/cmdline").read_bytes()) is (started == "forked")
        if started == "spawned":
            assert environ_of(worker)["MALLOC_ARENA_MAX"] == "2" and "HF_TOKEN" not in environ_of(worker)
        code, _, err = s.stop()
        assert code == 0, err
    finally:
        s.close()


def test_a_fresh_home_serves_without_importing_the_schema_library(libllama_v2: Path, gguf_models: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    """The check's answer was validated against its schema (jsonschema: about 60 ms) before the worker
    started, on every start in a home that had not kept it."""
    s = SuperfluidServe([cli.script("python"), "-X", "importtime", cli.script("superfluid"), "serve", "--port", "0",
                         "--model", str(gguf_models["always-the.gguf"]), "--llamacpp-lib", str(libllama_v2)],
                        cli.environment(tmp_path / "home"))
    try:
        assert s.complete(prompt="x", max_tokens=1)["choices"][0]["text"] == " the"
        code, _, err = s.stop()
    finally:
        s.close()
    assert code == 0, err[-2000:]
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$", err, re.MULTILINE))
    assert "superfluid.supervise" in imported, "no import report: -X importtime did not run"
    assert sorted(m for m in imported if m.split(".")[0] == "jsonschema") == []
