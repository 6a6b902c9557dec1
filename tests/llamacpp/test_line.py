"""``runtime/llamacpp/line``: which flags a check or serve line takes, how they read into the model
path and checked options, the library flag as given, and what makes a file not a GGUF. (The check of a
real libllama runs in ``test_worker.py``, ``test_check_serves.py``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.llamacpp.line import gguf_fault, is_flag, parse_flags, read_pairs, spelled_lib


@pytest.mark.parametrize(("name", "model", "known"), [
    ("lib", True, True), ("llamacpp-lib", False, True), ("model", True, True), ("model", False, False),
    ("n-gpu-layers", True, True), ("cache-type-k", False, True), ("basert-lib", True, False), ("bogus", True, False),
    ("llamacpp-n-gpu-layers", True, True), ("llamacpp-model", True, False), ("llamacpp-bogus", True, False),
])
def test_is_flag(name: str, model: bool, known: bool) -> None:
    assert is_flag(name, model=model) is known


@pytest.mark.parametrize(("argv", "want"), [
    pytest.param([], (None, {}), id="nothing"),
    pytest.param(["--model", "m.gguf", "--threads", "2"], ("m.gguf", {"threads": 2}), id="model-and-option"),
    pytest.param(["--llamacpp-lib=/l", "--flash-attn", "on"], (None, {"lib": "/l", "flash-attn": "on"}),
                 id="either-lib-spelling-is-lib"),
    pytest.param(["--lib", "/l", "--tensor-split", "3,1"], (None, {"lib": "/l", "tensor-split": [3.0, 1.0]}),
                 id="a-list"),
    pytest.param(["--llamacpp-n-gpu-layers", "0", "--llamacpp-flash-attn=on"],
                 (None, {"n-gpu-layers": 0, "flash-attn": "on"}), id="serve-spelling-as-the-face-forwards-it"),
])
def test_parse_flags(argv: list[str], want: tuple[str | None, dict[str, Any]]) -> None:
    assert parse_flags(argv) == want


@pytest.mark.parametrize(("argv", "model", "fragment"), [
    pytest.param(["--bogus", "1"], True, "unknown flag --bogus", id="unknown"),
    pytest.param(["--model", "m.gguf"], False, "unknown flag --model", id="model-where-none-is-taken"),
    pytest.param(["--threads", "0"], True, "--threads '0'", id="out-of-range"),
    pytest.param(["--cache-type-k", "q9"], True, "--cache-type-k 'q9'", id="not-a-cache-type"),
    pytest.param(["--threads"], True, "--threads needs a value", id="no-value"),
    pytest.param(["--llamacpp-threads", "0"], True, "--llamacpp-threads '0'", id="serve-spelling-out-of-range"),
    pytest.param(["--lib", "/a", "--llamacpp-lib", "/b"], True, "--llamacpp-lib and --lib name the same option",
                 id="both-spellings"),
])
def test_parse_flags_refuses(argv: list[str], model: bool, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        parse_flags(argv, model=model)


def test_read_pairs_without_a_model_reads_model_as_an_option_name() -> None:
    with pytest.raises(UsageError):
        read_pairs([("model", "m.gguf")], model=False)
    assert read_pairs([("model", "m.gguf"), ("lib", "/l")]) == ("m.gguf", {"lib": "/l"})


@pytest.mark.parametrize(("argv", "spelled"), [
    ([], None), (["--lib", "/l"], "--lib"), (["--model", "m", "--llamacpp-lib=/l"], "--llamacpp-lib"),
    (["--library", "/l"], None),
])
def test_the_library_flag_as_given(argv: list[str], spelled: str | None) -> None:
    assert spelled_lib(argv) == spelled


@pytest.mark.parametrize(("content", "fault"), [
    pytest.param(b"GGUF\x03\x00\x00\x00", None, id="gguf"),
    pytest.param(b"BASE\x01", "is not a GGUF file (it starts with b'BASE', not b'GGUF')", id="another-format"),
    pytest.param(b"", "is not a GGUF file (it starts with b'', not b'GGUF')", id="empty"),
    pytest.param(None, "cannot be read", id="absent"),
])
def test_gguf_fault(tmp_path: Path, content: bytes | None, fault: str | None) -> None:
    path = tmp_path / "m.gguf"
    if content is not None:
        path.write_bytes(content)
    got = gguf_fault(str(path))
    assert got == fault if fault is None else (got is not None and got.startswith(str(path)) and fault in got)
