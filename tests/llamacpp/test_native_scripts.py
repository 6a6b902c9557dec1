"""The native build scripts: stamps decide rebuilds; the GGUF writer is deterministic."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.llamacpp.conftest import build_libllama, make_gguf


def test_pins_are_exact_versions_and_digests() -> None:
    for layout, pin in build_libllama.PINS.items():
        assert pin.layout == layout and len(pin.sha256) == 64 and "==" not in pin.version
        assert pin.sdist.endswith(".tar.gz") and pin.tree.startswith(pin.sdist[: -len(".tar.gz")])


def test_a_build_is_current_only_when_its_stamp_holds_the_same_pinned_inputs(tmp_path: Path) -> None:
    pin = build_libllama.PINS["v1"]
    directory = build_libllama.layout_dir("v1", tmp_path)
    directory.mkdir(parents=True)
    assert not build_libllama.is_current(pin, tmp_path)  # no stamp
    (directory / "libllama.so").write_bytes(b"")
    stamp = {"inputs": build_libllama._wanted_stamp(pin)}
    (directory / "build.json").write_text(json.dumps(stamp))
    assert build_libllama.is_current(pin, tmp_path)
    moved = dataclasses.replace(pin, sha256="0" * 64)
    assert not build_libllama.is_current(moved, tmp_path)  # a changed pin rebuilds
    (directory / "build.json").write_text("{broken")
    assert not build_libllama.is_current(pin, tmp_path)


@pytest.mark.native
def test_the_built_libraries_carry_their_stamp_and_headers(libllama_each: Path) -> None:
    stamp = build_libllama.read_stamp(libllama_each)
    assert stamp is not None and stamp["layout"] == libllama_each.name
    assert stamp["inputs"] == build_libllama._wanted_stamp(build_libllama.PINS[libllama_each.name])
    assert (libllama_each / "include" / "llama.h").exists() and (libllama_each / "include" / "ggml.h").exists()
    assert any(p.name.startswith("libggml-base.so") for p in libllama_each.iterdir())


def test_the_gguf_writer_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    make_gguf.write(a, make_gguf.TinyModel(always="▁the"))
    make_gguf.write(b, make_gguf.TinyModel(always="▁the"))
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:4] == b"GGUF"
    assert make_gguf.token_id("▁the") == 292 and make_gguf.token_id("</s>") == 2
