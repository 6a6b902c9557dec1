"""An archive made as upstream's release workflow makes its Linux ones (issue 31, item 5): llama.cpp
built with ``GGML_BACKEND_DL=ON`` (libllama links no CPU backend; ``libggml-cpu.so`` is a module the
loader finds beside it at run time, ``ggml_backend_load_all_from_path``), RPATH ``$ORIGIN``, packed
flat under ``llama-<tag>/`` in ``llama-<tag>-bin-ubuntu-x64.tar.gz`` with its symlink chains. It is
installed from a mirror folder by the real console script and serves a completion."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.elf import read as read_elf
from tests import cli
from tests.conftest import libllama
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer
from tests.serve.test_serve_openai import client, start, stop_cleanly

TAG = "b11642"  # a build the llama.cpp adapter lists as tested, with the layout of the v2 tree


@pytest.fixture(scope="session")
def libllama_dl() -> Path:
    """The real libllama built as upstream's release builds it (``build_libllama.py dl``)."""
    return libllama("dl")


@pytest.mark.native
def test_a_backend_dl_release_archive_installs_from_a_mirror_folder_and_serves(
        libllama_dl: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    libllama_so = read_elf(str(libllama_dl / "libllama.so"))
    assert (libllama_dl / "libggml-cpu.so").is_file()
    assert not any("ggml-cpu" in n for n in libllama_so.needed), "the CPU backend is a module, not linked"
    releases = ReleaseServer()  # never started: its state is written as a mirror folder
    releases.add_release("ggml-org/llama.cpp", TAG, {f"llama-{TAG}-bin-ubuntu-x64.tar.gz":
                                                     libllama_archive(libllama_dl, f"llama-{TAG}")})
    mirror = releases.write_mirror(tmp_path / "mirror")
    home = tmp_path / "home"
    done = cli.run("superfluid", "runtime", "install", "llamacpp", "--mirror", mirror, "--version", TAG,
                   env=cli.environment(home, SUPERFLUID_HOST_VULKAN="0"), timeout=300)
    assert done.code == 0, done.stderr
    lib = home / "runtimes" / "llamacpp" / f"{TAG}-cpu" / "lib"
    assert (lib / "libggml-cpu.so").is_file() and (lib / "libllama.so").exists()
    s = start(home, "--model", gguf_models["always-the.gguf"])
    try:
        assert s.ready["runtime"] == "llamacpp"
        answer = client(s).completions.create(model="always-the", prompt="Once upon a time", max_tokens=5,
                                              temperature=0)
        assert answer.choices[0].text == " the" * 5
        stop_cleanly(s)
    finally:
        s.close()
