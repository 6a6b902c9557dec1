"""``runtime/formats``: which runtime reads a model path, from the formats each adapter declares —
a directory by the files it holds, a file by its first bytes, else by its extension."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime.kernel.formats import MAGIC_BYTES, PathFacts, claim, describe, facts_of, match, reads, words

BASE = {"id": "base", "describe": "a baseRT model file", "file": {"extensions": ["base"], "magic": "BASE"}}
GGUF = {"id": "gguf", "describe": "a GGUF file", "file": {"extensions": ["gguf"], "magic": "GGUF"}}
MLX = {"id": "mlx", "describe": "an MLX model directory",
       "directory": {"files": ["config.json"], "extensions": ["safetensors"]}}
DECLARED = {"basert": [BASE], "llamacpp": [GGUF], "mlx": [MLX]}


def file(name: str, head: bytes = b"") -> PathFacts:
    return PathFacts(name, False, head, ())


def folder(name: str, *entries: str) -> PathFacts:
    return PathFacts(name, True, b"", tuple(entries))


@pytest.mark.parametrize(("fmt", "facts", "how"), [
    pytest.param(GGUF, file("m.gguf", b"GGUF\x03\x00"), "magic", id="magic-and-extension"),
    pytest.param(GGUF, file("model.bin", b"GGUF\x03\x00"), "magic", id="magic-alone"),
    pytest.param(GGUF, file("m.GGUF", b"\x00\x00"), "extension", id="extension-any-case"),
    pytest.param(GGUF, file("m.gguf.part", b""), None, id="extension-not-last"),
    pytest.param(GGUF, file("mgguf", b"GGU"), None, id="neither"),
    pytest.param(GGUF, folder("m.gguf", "config.json"), None, id="a-file-format-never-a-directory"),
    pytest.param(MLX, folder("m", "config.json", "model.safetensors", "tokenizer.json"), "directory", id="directory"),
    pytest.param(MLX, folder("m", "config.json", "MODEL.SafeTensors"), "directory", id="directory-extension-any-case"),
    pytest.param(MLX, folder("m", "model.safetensors"), None, id="directory-lacks-a-file"),
    pytest.param(MLX, folder("m", "config.json"), None, id="directory-lacks-an-extension"),
    pytest.param(MLX, file("config.json", b"{}"), None, id="a-directory-format-never-a-file"),
    pytest.param({"id": "x", "file": {"magic": "", "extensions": []}}, file("x", b"anything"), None, id="empty-magic"),
    pytest.param({"id": "x", "file": "GGUF"}, file("m.gguf", b"GGUF"), None, id="malformed-file-spec"),
    pytest.param({"id": "x", "directory": {}}, folder("any"), "directory", id="empty-directory-spec"),
])
def test_match(fmt: dict[str, object], facts: PathFacts, how: str | None) -> None:
    assert match(fmt, facts) == how


@pytest.mark.parametrize(("facts", "runtime"), [
    pytest.param(file("tiny.base", b"BASE\x01"), "basert", id="base-by-magic"),
    pytest.param(file("m.gguf", b"GGUF"), "llamacpp", id="gguf-by-magic"),
    pytest.param(file("broken.gguf", b"\x00"), "llamacpp", id="broken-gguf-by-extension"),
    pytest.param(file("model.base", b"GGUF"), "llamacpp", id="magic-beats-extension"),
    pytest.param(folder("m", "config.json", "w.safetensors"), "mlx", id="mlx-directory"),
    pytest.param(file("readme.txt", b"hello"), None, id="unclaimed"),
    pytest.param(folder("empty"), None, id="empty-directory"),
])
def test_claim(facts: PathFacts, runtime: str | None) -> None:
    got = claim(DECLARED, facts)
    assert (got[0] if got else None) == runtime


def test_claim_answers_the_format_and_the_first_runtime_of_each_kind() -> None:
    twice = {"basert": [BASE], "other": [{**GGUF, "id": "other-gguf"}], "llamacpp": [GGUF]}
    assert claim(twice, file("m.gguf", b"GGUF")) == ("other", {**GGUF, "id": "other-gguf"})
    by_ext = {"a": [{"id": "a", "file": {"extensions": ["gguf"]}}], "llamacpp": [GGUF]}
    assert claim(by_ext, file("m.gguf", b"GGUF")) == ("llamacpp", GGUF)  # a magic claim outranks an earlier extension


def test_facts_of_a_file_a_directory_and_nothing(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(range(40)))
    assert facts_of(str(model)) == PathFacts("m.gguf", False, (b"GGUF" + bytes(range(40)))[:MAGIC_BYTES], ())
    (tmp_path / "mlx").mkdir()
    for name in ("w.safetensors", "config.json"):
        (tmp_path / "mlx" / name).write_text("{}")
    assert facts_of(str(tmp_path / "mlx") + "/") == PathFacts("mlx", True, b"", ("config.json", "w.safetensors"))
    assert facts_of(str(tmp_path / "missing.gguf")) == PathFacts("missing.gguf", False, b"", ())


def test_facts_of_an_unreadable_file_is_an_empty_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from superfluid.runtime.kernel import formats
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(model))

    monkeypatch.setattr(formats, "open", refused, raising=False)  # as for another user's file (we may be root)
    assert facts_of(str(model)) == PathFacts("m.gguf", False, b"", ())


def test_describe() -> None:
    assert describe(DECLARED) == (
        "basert reads a baseRT model file (starts with BASE, or .base); llamacpp reads a GGUF file (starts with GGUF, "
        "or .gguf); mlx reads an MLX model directory (holding config.json, *.safetensors)")
    assert describe({"a": [{"id": "plain"}], "b": []}) == "a reads plain"
    assert describe({"a": [{"id": "x", "file": {"extensions": ["x", "y"]}}, MLX]}) == (
        "a reads x (.x/.y) or an MLX model directory (holding config.json, *.safetensors)")
    assert describe({}) == describe({"a": []}) == "no runtime declares a model format"


@pytest.mark.parametrize(("formats", "said"), [
    pytest.param([GGUF], "a GGUF file", id="one"),
    pytest.param([BASE, GGUF], "a baseRT model file or a GGUF file", id="two"),
    pytest.param([BASE, GGUF, MLX], "a baseRT model file, a GGUF file or an MLX model directory", id="three"),
    pytest.param([], "no model format", id="none"),
])
def test_words_say_what_it_reads(formats: list[dict[str, object]], said: str) -> None:
    assert words(formats) == said


def test_reads_refuses_a_missing_path_and_another_format(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03")
    (tmp_path / "notes.txt").write_text("not a model")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert reads([GGUF], str(tmp_path / "m.gguf")) is None
    assert reads([BASE, GGUF], str(tmp_path / "m.gguf")) is None
    assert reads([GGUF], str(tmp_path / "notes.txt")) == \
        f"it reads a GGUF file, and {tmp_path / 'notes.txt'} is not one"
    assert reads([GGUF], str(tmp_path / "gone")) == f"{tmp_path / 'gone'}: no such file or directory"
    assert reads([GGUF], str(tmp_path / "dangling")).startswith("it reads a GGUF file")  # type: ignore[union-attr]
    assert reads([], str(tmp_path / "m.gguf")) == f"it reads no model format, and {tmp_path / 'm.gguf'} is not one"
