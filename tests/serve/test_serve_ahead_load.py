"""A restart's worker loads its engine before the face decides only where what it loads is what the last
start served, unchanged (``serve_ahead.Ahead.served`` keeps it, ``begin`` checks it), with the real
worker beside superfluid and the real libllama. The tests call ``begin`` in the test process, which
forks as the face does, and watch the fork's mapped files in ``/proc``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from superfluid.runtime.process import worker_env
from superfluid.serve_ahead import FILE, Ahead, begin
from tests import cli

pytestmark = [pytest.mark.native, pytest.mark.usefixtures("as_the_face", "no_other_thread")]


class Line:
    """A serve line naming its library, the worker it chooses, and its home (made a moment ago)."""

    def __init__(self, tmp_path: Path, model: Path, lib: Path) -> None:
        self.home = tmp_path / "home"
        self.model = tmp_path / "model.gguf"
        self.model.write_bytes(model.read_bytes())
        self.environ = cli.environment(self.home)
        self.line = ["serve", "--model", str(self.model), "--port", "0", "--llamacpp-lib", str(lib)]
        self.worker = [str(cli.script("superfluid-worker-llamacpp")), "serve", "--model", str(self.model),
                       "--host", "127.0.0.1", "--port", "0", "--queue", "16", "--llamacpp-lib", str(lib)]
        self.lib = lib
        time.sleep(0.3)  # older than a start beginning now by more than the racy margin

    def begin(self) -> Ahead:
        ahead = begin(self.line, self.environ)
        assert ahead is not None
        return ahead

    def served_once(self) -> Ahead:
        """A start of this line, decided at once (its fork stopped), whose worker served."""
        ahead = self.begin()
        ahead.close()
        self.served(ahead)
        return ahead

    def served(self, ahead: Ahead, worker: list[str] | None = None) -> None:
        """As the face does once the worker it chose announced itself (this process stands for it)."""
        ahead.remember(worker or self.worker)
        ahead.served(os.getpid(), worker or self.worker, worker_env(self.environ),
                     {"library": str(self.lib / "libllama.so"), "path": str(self.model)})

    def loads(self) -> dict[str, dict[str, object]]:
        return json.loads((self.home / "cache" / FILE).read_text()).get("loads", {})  # type: ignore[no-any-return]


def maps(pid: int, path: Path, seconds: float) -> bool:
    """Whether process ``pid`` maps ``path`` within ``seconds`` (the model this test made: the test process,
    which the fork copies, never maps it; libllama it may have loaded already)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if str(path) in Path(f"/proc/{pid}/maps").read_text():
                return True
        except OSError:
            return False
        time.sleep(0.01)
    return False


def test_what_the_worker_served_loaded_is_kept_with_its_fingerprints(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    line = Line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    line.served_once()
    (entry,) = line.loads().values()
    paths = {dep[0] for dep in entry["deps"]}  # type: ignore[attr-defined]
    assert {str(line.model), str(libllama_v2 / "libllama.so"), line.worker[0], "/etc/ld.so.cache",
            os.getcwd(), os.path.dirname(os.path.realpath(sys.executable))} <= paths
    assert entry["argv"] == line.worker


def test_a_restart_loads_first_what_is_unchanged_and_waits_for_the_word_to_bind(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    line = Line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    line.served_once()
    again = line.begin()
    try:
        assert again.proc is not None and again.waiting is None  # the guess, told to load first
        assert maps(again.proc.pid, line.model, 20), "the engine was not loaded ahead"
        assert again.proc.poll() is None  # loaded, and waiting for the word before it binds
    finally:
        again.close()


def test_a_restart_whose_model_changed_waits_for_the_face(libllama_v2: Path, gguf_models: dict[str, Path],
                                                          tmp_path: Path) -> None:
    line = Line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    line.served_once()
    line.model.write_bytes(line.model.read_bytes())  # the same bytes, written again: a change all the same
    again = line.begin()
    try:
        assert again.proc is None and again.waiting is not None  # a fork waiting to be told what to be
        assert not maps(again.waiting.pid, line.model, 1.5)
    finally:
        again.close()


def test_nothing_is_kept_for_a_library_searched_for_or_changed_while_the_face_began(
        libllama_v2: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    line = Line(tmp_path, gguf_models["always-the.gguf"], libllama_v2)
    ahead = line.served_once()
    assert len(line.loads()) == 1
    line.served(ahead, line.worker[:-2])  # the same line's worker, now searching for its library
    assert line.loads() == {}  # the entry kept for this line is dropped, not left standing
    late = line.begin()
    late.close()
    line.model.write_bytes(line.model.read_bytes())  # changed after this start began: maybe not what was loaded
    line.served(late)
    assert line.loads() == {}
