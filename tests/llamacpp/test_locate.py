"""``runtime/llamacpp/locate``: libllama's names, flag and variable, and its words when nothing is
found (the search itself is tests/runtime/hostfacts/test_locate.py, run for every adapter); then the real
libllama found in its build directory, as the worker's ``--lib`` names it, and loaded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.runtime.kernel.errors import LibraryNotFound
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.llamacpp import locate


def test_its_names() -> None:
    assert (locate.FLAG, locate.ENV) == ("--llamacpp-lib", "SUPERFLUID_LLAMA_LIB")
    assert (locate.LIBRARY.flag, locate.LIBRARY.env, locate.LIBRARY.runtime_id) == (locate.FLAG, locate.ENV,
                                                                                   "llamacpp")
    assert locate.LIBRARY.installs().argv == ("superfluid", "runtime", "install", "llamacpp")
    assert locate.LIBRARY.advice == f"name one with {locate.FLAG} or {locate.ENV}"


@pytest.mark.parametrize(("platform", "names"), [
    pytest.param("linux", ("libllama.so", "libllama.so.0"), id="linux"),
    pytest.param("darwin", ("libllama.dylib", "libllama.0.dylib"), id="macos"),
    pytest.param("freebsd14", ("libllama.so", "libllama.so.0"), id="another-unix"),
])
def test_library_names(platform: str, names: tuple[str, str]) -> None:
    assert locate.library_names(platform) == names


def _lib(folder: Path, name: str = "libllama.so") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"\x7fELF stand-in")
    return folder / name


@pytest.mark.parametrize(("flag", "var", "spelled", "named"), [
    pytest.param("flag", None, None, "--llamacpp-lib", id="the-flag"),
    pytest.param("flag", None, "--lib", "--lib", id="the-workers-spelling"),
    pytest.param(None, "var", None, "SUPERFLUID_LLAMA_LIB", id="the-variable"),
    pytest.param("flag", "var", None, "--llamacpp-lib", id="flag-before-variable"),
    pytest.param(None, None, None, None, id="searched"),
])
def test_who_named_it(tmp_path: Path, flag: str | None, var: str | None, spelled: str | None,
                      named: str | None) -> None:
    home = tmp_path / "home"
    dirs = {"flag": _lib(tmp_path / "f").parent, "var": _lib(tmp_path / "v").parent}
    _lib(tmp_path / "prefix" / "lib")
    lookup = read({"SUPERFLUID_HOME": str(home), **({locate.ENV: str(dirs[var])} if var else {})})
    got = locate.locate(str(dirs[flag]) if flag else None, lookup, executable=str(tmp_path / "prefix" / "bin" / "w"),
                        platform="linux", spelled=spelled)
    assert got.named == named
    where = dirs[flag] if flag else dirs[var] if var else tmp_path / "prefix" / "lib"
    assert got.path == str(where / "libllama.so")


def test_the_so_0_name_is_found_when_the_plain_one_is_not(tmp_path: Path) -> None:
    lib = _lib(tmp_path / "d", "libllama.so.0")
    assert locate.locate(str(lib.parent), read({}), platform="linux").path == str(lib)


@pytest.mark.parametrize(("spelled", "start"), [
    pytest.param(None, "--llamacpp-lib names the directory", id="flag"),
    pytest.param("--lib", "--lib names the directory", id="workers-spelling"),
])
def test_a_named_directory_without_libllama_is_said_in_the_words_given(tmp_path: Path, spelled: str | None,
                                                                       start: str) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(LibraryNotFound) as e:
        locate.locate(str(tmp_path / "empty"), read({}), platform="linux", spelled=spelled)
    assert e.value.message.startswith(start)
    assert e.value.looked == [str(tmp_path / "empty" / "libllama.so"), str(tmp_path / "empty" / "libllama.so.0")]
    assert e.value.fixes == (locate.LIBRARY.installs(),) and e.value.advice == locate.LIBRARY.advice


def test_nothing_found_names_where_it_looked(tmp_path: Path) -> None:
    exe = tmp_path / "prefix" / "bin" / "superfluid-worker-llamacpp"
    with pytest.raises(LibraryNotFound) as e:
        locate.locate(None, read({"SUPERFLUID_HOME": str(tmp_path / "home")}), executable=str(exe), platform="linux")
    assert e.value.message.startswith(f"llama.cpp not found (looked for libllama.so in {exe.parent}, ")
    assert str(tmp_path / "home" / "runtimes" / "llamacpp" / "current" / "lib") in e.value.message
    assert len(e.value.looked) == 6


def test_the_real_libllama_is_found_and_loads(libllama_v2: Path) -> None:
    """The build directory of the real v2 libllama, named as the worker's --lib names it."""
    from superfluid.runtime.llamacpp.loader import load

    found = locate.locate(str(libllama_v2), read({}), spelled="--lib")
    assert found.named == "--lib" and os.path.dirname(found.path) == str(libllama_v2)
    assert os.path.basename(found.path) == locate.library_names()[0]
    lib = load(found.path)
    assert lib.version
