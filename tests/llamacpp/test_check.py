"""``runtime/llamacpp/check``: the report when no libllama can be had, in process (a real libllama is
checked in a worker of its own: ``test_worker.py``, ``test_check_serves.py``): refused with the words
and the flag as the line spelled it, and the model's path judged by its format all the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.llamacpp.check import RUNTIME_ID, check_argv


@pytest.mark.parametrize(("flag", "what", "words"), [
    pytest.param("--lib", "missing", "which does not exist", id="lib-missing"),
    pytest.param("--llamacpp-lib", "missing", "which does not exist", id="llamacpp-lib-missing"),
    pytest.param("--lib", "text", "could not load", id="not-a-library"),
])
def test_no_usable_library_is_refused_naming_the_flag_given(tmp_path: Path, flag: str, what: str,
                                                            words: str) -> None:
    lib = tmp_path / "libllama.so"
    if what == "text":
        lib.write_text("not a library\n")
    report, code = check_argv([flag, str(lib)], read({"SUPERFLUID_HOME": str(tmp_path / "home")}))
    assert code == 1
    assert report["runtime"]["id"] == RUNTIME_ID and report["named"] == flag
    assert isinstance(report["available"], str) and words in report["available"] and str(lib) in report["available"]
    assert report["available"].startswith(report["refused"])  # the refusal, then what to do
    assert "model" not in report


def test_a_model_is_judged_by_its_path_without_a_library(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    report, code = check_argv(["--lib", str(tmp_path / "none"), "--model", str(model)],
                              read({"SUPERFLUID_HOME": str(tmp_path / "home")}))
    assert code == 1 and report["model"]["path"] == str(model)
    assert report["model"]["reads"] == "not read: no usable llama.cpp here (see available)"
