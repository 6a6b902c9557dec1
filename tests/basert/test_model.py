"""A model through the reference engine: load errors, tokenizer, deterministic greedy generation."""

from __future__ import annotations

from pathlib import Path

import make_model
import pytest
from basert_helpers import lib_path

from superfluid.runtime.basert.config import facts
from superfluid.runtime.basert.loader import Library, load_library
from superfluid.runtime.basert.model import GenerationFailed, Model, looks_like_model
from superfluid.runtime.kernel.errors import ModelLoadFailed

COMPLETION = " a time the tiny reference engine spoke plainly and stopped"


@pytest.fixture(params=["0.3.0", "0.3.1", "0.4.0"])
def lib(request: pytest.FixtureRequest, engines: Path) -> Library:
    return load_library(str(lib_path(engines, request.param)))


@pytest.mark.parametrize(("prompt", "max_tokens", "text"), [
    pytest.param("once upon", 64, COMPLETION, id="continues-to-the-end"),
    pytest.param("once upon", 3, " a time the", id="stops-at-max-tokens"),
    pytest.param("", 64, " " + make_model.SENTENCE, id="empty-prompt-from-bos"),
    pytest.param("the tiny", 2, " reference engine", id="mid-sentence"),
    pytest.param("hello", 64, "", id="unknown-word-ends"),
    pytest.param("stopped", 64, "", id="last-word-ends"),
])
def test_generation(lib: Library, tiny_model: Path, prompt: str, max_tokens: int, text: str) -> None:
    with Model.load(lib, str(tiny_model)) as model:
        first = model.generate(prompt, max_tokens)
        assert model.generate(prompt, max_tokens) == first  # deterministic
    assert first == text


def test_tokenizer_round_trip(lib: Library, tiny_model: Path) -> None:
    with Model.load(lib, str(tiny_model)) as model:
        tokens = model.encode("  once\tupon  a\n")
        assert len(tokens) == 3
        assert model.decode(tokens) == " once upon a"
        assert model.encode("unheard") == [2]  # <unk>
        assert model.token_text(model.bos) == model.token_text(model.eos) == ""


def test_facts(lib: Library, tiny_model: Path) -> None:
    with Model.load(lib, str(tiny_model)) as model:
        got = facts(model.config())
    assert got == {"architecture": "ref", "vocab_size": 15, "n_layers": 2, "dim": 64, "n_heads": 4,
                   "n_kv_heads": 4, "head_dim": 16, "ffn_dim": 256, "max_seq_len": 128}


def test_max_context_clips_the_window(engines: Path, tiny_model: Path) -> None:
    lib = load_library(str(lib_path(engines, "0.4.0")))
    with Model.load(lib, str(tiny_model), max_context=6) as model:
        assert model.config().max_seq_len == 6
        assert model.generate("once upon", 64) == " a time the"  # the window is full at 6


def test_a_prompt_longer_than_the_window_fails(engines: Path, tiny_model: Path) -> None:
    lib = load_library(str(lib_path(engines, "0.3.1")))
    with Model.load(lib, str(tiny_model), max_context=3) as model:
        with pytest.raises(GenerationFailed, match="prompt exceeds the context .*GENERATION_FAILED"):
            model.generate("once upon a time", 4)


@pytest.mark.parametrize(("content", "reason"), [
    pytest.param(None, r"cannot open model file .* \(FILE_NOT_FOUND\)", id="missing"),
    pytest.param(b"GGUF" + b"\0" * 100, r"is not a baseRT model \(no BASE magic at offset 0\) \(INVALID_FORMAT\)",
                 id="bad-magic"),
    pytest.param(b"BASE\1\0\0\0", r"unsupported or truncated model header \(INVALID_FORMAT\)", id="short-header"),
    pytest.param(make_model.model_bytes()[:-3], r"model file is truncated \(INVALID_FORMAT\)", id="truncated"),
    pytest.param(make_model.model_bytes()[:-4] + b"\xff\xff\0\0", r"outside the vocabulary",
                 id="next-table-out-of-range"),
])
def test_load_errors(engines: Path, tmp_path: Path, content: bytes | None, reason: str) -> None:
    lib = load_library(str(lib_path(engines, "0.4.0")))
    path = tmp_path / "m.base"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelLoadFailed, match=reason) as caught:
        Model.load(lib, str(path))
    assert f"could not load the model {path}" in str(caught.value)


def test_a_closed_model_refuses_calls(engines: Path, tiny_model: Path) -> None:
    model = Model.load(load_library(str(lib_path(engines, "0.3.0"))), str(tiny_model))
    model.close()
    model.close()  # twice is harmless
    with pytest.raises(GenerationFailed, match="is closed"):
        model.encode("once")


def test_looks_like_model(tmp_path: Path, tiny_model: Path) -> None:
    assert looks_like_model(str(tiny_model)) is None
    assert "is a directory" in (looks_like_model(str(tmp_path)) or "")
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    assert "does not start with BASE" in (looks_like_model(str(tmp_path / "x.gguf")) or "")
    assert "cannot read" in (looks_like_model(str(tmp_path / "nope")) or "")


def test_make_model_refuses_repeated_words() -> None:
    with pytest.raises(ValueError, match="unique"):
        make_model.model_bytes("a b a")


def test_a_custom_sentence(engines: Path, tmp_path: Path) -> None:
    path = make_model.write_model(tmp_path / "m.base", "red green blue")
    with Model.load(load_library(str(lib_path(engines, "0.3.0"))), str(path)) as model:
        assert model.generate("red", 10) == " green blue"
        assert model.config().vocab_size == 6
