"""Where libbaseRT is found: flag > BASERT_LIB > beside the executable > ../lib > the current install."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from basert_helpers import LIB_NAME, lib_path

from superfluid.runtime.basert.loader import open_library
from superfluid.runtime.basert.locate import library_names, locate
from superfluid.runtime.errors import LibraryNotFound

SO = "libbaseRT.so"


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF stand-in: locate never loads")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """An executable in prefix/bin with a library beside it, one in prefix/lib, one in the home's
    current install, one in a flag dir and one in an env dir."""
    prefix = tmp_path / "prefix"
    exe = touch(prefix / "bin" / "superfluid-worker-basert")
    home = tmp_path / "home"
    install = home / "runtimes" / "basert" / "0.4.0-cpu"
    (home / "runtimes" / "basert").mkdir(parents=True)
    os.symlink("0.4.0-cpu", home / "runtimes" / "basert" / "current")
    return {
        "exe": exe,
        "home": home,
        "beside": touch(prefix / "bin" / SO),
        "libdir": touch(prefix / "lib" / SO),
        "current": touch(install / "lib" / SO),
        "flag": touch(tmp_path / "flagdir" / SO),
        "env": touch(tmp_path / "envdir" / SO),
    }


def env_of(tree: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"SUPERFLUID_HOME": str(tree["home"]), **extra}


def test_flag_beats_env(tree: dict[str, Path]) -> None:
    found = locate(str(tree["flag"].parent), env_of(tree, BASERT_LIB=str(tree["env"].parent)),
                   executable=str(tree["exe"]), platform="linux")
    assert (found.path, found.named) == (str(tree["flag"]), "--basert-lib")


def test_env_beats_the_search(tree: dict[str, Path]) -> None:
    found = locate(None, env_of(tree, BASERT_LIB=str(tree["env"].parent)), executable=str(tree["exe"]),
                   platform="linux")
    assert (found.path, found.named) == (str(tree["env"]), "BASERT_LIB")


def test_empty_env_is_unset(tree: dict[str, Path]) -> None:
    found = locate("", env_of(tree, BASERT_LIB=""), executable=str(tree["exe"]), platform="linux")
    assert (found.path, found.named) == (str(tree["beside"]), None)


def test_search_order(tree: dict[str, Path]) -> None:
    env, exe = env_of(tree), str(tree["exe"])
    assert locate(None, env, executable=exe, platform="linux").path == str(tree["beside"])
    tree["beside"].unlink()
    assert locate(None, env, executable=exe, platform="linux").path == str(tree["libdir"])
    tree["libdir"].unlink()
    found = locate(None, env, executable=exe, platform="linux")
    assert found.path.endswith("runtimes/basert/current/lib/libbaseRT.so") and found.named is None
    tree["current"].unlink()
    with pytest.raises(LibraryNotFound) as caught:
        locate(None, env, executable=exe, platform="linux")
    e = caught.value
    assert e.message.startswith("libbaseRT not found (looked in ")
    assert str(tree["exe"].parent) in e.message and "runtimes/basert/current/lib" in e.message
    assert "superfluid runtime install basert" in str(e)
    assert len(e.looked) == 6  # three directories, two names each


def test_beside_the_real_executable(tree: dict[str, Path], tmp_path: Path) -> None:
    link = tmp_path / "elsewhere" / "superfluid-worker-basert"
    link.parent.mkdir()
    os.symlink(tree["exe"], link)
    found = locate(None, env_of(tree), executable=str(link), platform="linux")
    assert found.path == str(tree["beside"])


@pytest.mark.parametrize(("present", "chosen"), [
    pytest.param(["libbaseRT.so", "libbaseRT.so.0"], "libbaseRT.so", id="so-before-so.0"),
    pytest.param(["libbaseRT.so.0"], "libbaseRT.so.0", id="so.0-alone"),
])
def test_directory_names(tmp_path: Path, present: list[str], chosen: str) -> None:
    for name in present:
        touch(tmp_path / "d" / name)
    found = locate(str(tmp_path / "d"), {}, executable=None, platform="linux")
    assert found.path == str(tmp_path / "d" / chosen)


def test_macos_names() -> None:
    assert library_names("darwin") == ("libbaseRT.dylib", "libbaseRT.0.dylib")
    assert library_names("linux") == ("libbaseRT.so", "libbaseRT.so.0")


def test_a_named_file_is_used_as_named(tmp_path: Path) -> None:
    odd = touch(tmp_path / "custom-engine.bin")
    found = locate(None, {"BASERT_LIB": str(odd)}, executable=None, platform="linux")
    assert (found.path, found.named) == (str(odd), "BASERT_LIB")


def test_a_named_directory_is_searched_nowhere_else(tree: dict[str, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LibraryNotFound, match=r"--basert-lib names the directory .*empty, which holds "
                                              r"neither libbaseRT.so nor libbaseRT.so.0"):
        locate(str(empty), env_of(tree), executable=str(tree["exe"]), platform="linux")


def test_a_named_path_that_does_not_exist(tmp_path: Path) -> None:
    gone = tmp_path / "gone" / "libbaseRT.so"
    with pytest.raises(LibraryNotFound, match=rf"BASERT_LIB names {gone}, which does not exist"):
        locate(None, {"BASERT_LIB": str(gone)}, executable=None, platform="linux")


def test_open_library_from_the_current_install(engines: Path, tmp_path: Path) -> None:
    """End to end: the search reaches the home's current install, and the verdict runs on it."""
    home = tmp_path / "home"
    lib_dir = home / "runtimes" / "basert" / "0.3.1-cpu" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(lib_path(engines, "0.3.1"), lib_dir / LIB_NAME)
    os.symlink("0.3.1-cpu", home / "runtimes" / "basert" / "current")
    exe = touch(tmp_path / "bin" / "tool")
    lib = open_library(None, {"SUPERFLUID_HOME": str(home)}, executable=str(exe))
    assert (lib.version, lib.abi, lib.named) == ("0.3.1", 1, None)
    assert lib.path == str(home / "runtimes" / "basert" / "current" / "lib" / LIB_NAME)
