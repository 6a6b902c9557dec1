"""The native build scripts: stamps decide rebuilds; the GGUF writer is deterministic."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, native_script
from tests.llamacpp.conftest import build_libllama, make_gguf

build_llama_server = native_script("build_llama_server")


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


def test_a_vocabulary_size_pads_the_word_pieces_and_is_refused_below_the_base() -> None:
    base = make_gguf.vocabulary()
    padded = make_gguf.vocabulary(len(base) + 3)
    assert padded[: len(base)] == base and padded[len(base):] == ["▁w0", "▁w1", "▁w2"]
    assert make_gguf.vocabulary(len(base)) == base
    with pytest.raises(ValueError, match="smaller than the base one"):
        make_gguf.vocabulary(len(base) - 1)


def test_words_only_zeroes_the_output_rows_of_the_control_and_byte_tokens(tmp_path: Path) -> None:
    import gguf
    import numpy as np

    path = make_gguf.write(tmp_path / "w.gguf", make_gguf.TinyModel(vocab=400, words_only=True))
    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    out = np.asarray(tensors["output.weight"].data)
    assert out.shape == (400, 64)
    assert not out[: make_gguf.N_SPECIAL].any() and out[make_gguf.N_SPECIAL :].any()


_LOAD = textwrap.dedent("""
    import json, sys
    from superfluid.runtime.llamacpp import drive, loader
    lib = loader.load(sys.argv[1])
    with drive.load_model(lib, sys.argv[2]) as m:
        facts = m.facts()
        print(json.dumps({"n_vocab": facts["n_vocab"], "last": m.detokenize([facts["n_vocab"] - 1]),
                          "round_trip": m.detokenize(m.tokenize("the cat sat", add_special=False))}))
""")


@pytest.mark.native
def test_libllama_loads_a_model_of_the_vocabulary_size_asked(libllama_v2: Path, tmp_path: Path) -> None:
    path = make_gguf.write(tmp_path / "v.gguf", make_gguf.TinyModel(f16=True, vocab=5000, words_only=True))
    done = subprocess.run([sys.executable, "-c", _LOAD, str(libllama_v2 / "libllama.so"), str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    # the padding is whole pieces no merge of ordinary text reaches
    assert got == {"n_vocab": 5000, "last": f" w{5000 - len(make_gguf.vocabulary()) - 1}",
                   "round_trip": " the cat sat"}


def test_the_benchmark_models_are_cached_with_their_stamp(tmp_path: Path) -> None:
    model = make_gguf.TinyModel(vocab=330)
    path = make_gguf.write_cached(tmp_path / "m.gguf", model)
    written = path.stat().st_mtime_ns
    assert make_gguf.write_cached(path, model).stat().st_mtime_ns == written  # current: not rewritten
    stamp = json.loads(path.with_name("m.gguf.json").read_text())
    assert stamp == {"generator": make_gguf.GENERATOR_REVISION, "model": dataclasses.asdict(model)}
    make_gguf.write_cached(path, dataclasses.replace(model, vocab=340))
    assert json.loads(path.with_name("m.gguf.json").read_text())["model"]["vocab"] == 340
    assert set(make_gguf.BENCH) and all(m.words_only for m in make_gguf.BENCH.values())


def test_the_server_build_is_current_only_when_its_stamp_holds_the_same_pinned_inputs(tmp_path: Path) -> None:
    directory = build_llama_server.server_dir(tmp_path)
    directory.mkdir(parents=True)
    (directory / "llama-server").write_bytes(b"")
    assert not build_llama_server.is_current(tmp_path)  # no stamp
    stamp = {"inputs": build_llama_server._wanted_stamp()}
    (directory / "build.json").write_text(json.dumps(stamp))
    assert build_llama_server.is_current(tmp_path)
    # it runs on the v2 libllama: a changed v2 pin rebuilds it too
    assert stamp["inputs"]["engine"] == build_libllama._wanted_stamp(build_libllama.PINS["v2"])


def test_the_server_builds_offline_on_the_v2_libllama_and_never_in_ci() -> None:
    flags = build_llama_server.CMAKE_FLAGS
    offline = {"-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=OFF"}
    assert offline <= set(flags)
    assert "-DCMAKE_INSTALL_RPATH=$ORIGIN;$ORIGIN/../v2" in flags and build_llama_server.ENGINE == "v2"
    assert "build_llama_server" not in (ROOT / "scripts" / "build-native").read_text()
    assert "build_llama_server" not in (ROOT / ".ci" / "run").read_text()
