"""``runtime check`` passes only what serving then runs (issue 14, item 3): a cache type whose block
does not divide the model's head size is a failed check (exit 1) naming the option, as the worker's
serve exits 3 with it; a cache type that fits passes both. Real libllama, real subprocesses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli
from tests.conftest import ROOT

pytestmark = pytest.mark.native


def check(home: Path, lib: Path, model: Path, *flags: str) -> cli.Run:
    return cli.run("superfluid", "runtime", "check", "llamacpp", "--model", model, "--llamacpp-lib",
                   lib / "libllama.so", *flags, env=cli.environment(home), timeout=60)


def serve_exit(home: Path, lib: Path, model: Path, *flags: str) -> int:
    """The worker's serve exit code with these options (3: the model did not load); a serve that
    starts is stopped once it announces itself."""
    proc = subprocess.Popen([sys.executable, "-m", "superfluid.runtime.llamacpp.worker", "serve", "--lib", str(lib),
                             "--model", str(model), "--port", "0", *flags], cwd=ROOT, env=cli.environment(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the announcement, or "" when it exited
        if line:
            proc.terminate()
        return proc.wait(timeout=60) if not line else 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


CASES = [
    # (name, model, flags, check passes, fragment of the check's refusal)
    pytest.param("tiny-f16.gguf", ["--cache-type-k", "q8_0"], False, "--cache-type-k q8_0", id="k-block-32-head-16"),
    pytest.param("tiny-f16.gguf", ["--cache-type-v", "q4_0"], False, "--cache-type-v q4_0", id="v-block-32-head-16"),
    pytest.param("tiny-f16.gguf", ["--cache-type-k", "f32"], True, "", id="f32-fits-any-head"),
    pytest.param("hd32-always-the.gguf", ["--cache-type-k", "q8_0"], True, "", id="k-block-32-head-32"),
]


@pytest.mark.parametrize(("model", "flags", "passes", "fragment"), CASES)
def test_check_and_serve_agree_on_cache_types(tmp_path: Path, libllama_v2: Path, gguf_models: dict[str, Path],
                                              model: str, flags: list[str], passes: bool, fragment: str) -> None:
    done = check(tmp_path, libllama_v2, gguf_models[model], *flags)
    assert "Traceback" not in done.stderr
    assert (done.code == 0) == passes, done.stderr
    served = serve_exit(tmp_path, libllama_v2, gguf_models[model], *flags)
    assert (served == 0) == passes, f"serve exited {served}"
    if not passes:
        assert done.code == 1 and served == 3
        assert fragment in done.stderr and "does not divide" in done.stderr
