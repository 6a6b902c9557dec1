"""Where an engine library is found: one algorithm, asked through each adapter that uses it.

Every rule runs for basert and llamacpp alike (docs/runtimes.md); only the names, the flag, the
variable and the words of "not found" are the adapter's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.basert import locate as basert
from superfluid.runtime.hostfacts.locate import Library, Located
from superfluid.runtime.kernel.errors import LibraryNotFound
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.lookup import Lookup, read
from superfluid.runtime.llamacpp import locate as llamacpp

ADAPTERS = [pytest.param(basert, id="basert"), pytest.param(llamacpp, id="llamacpp")]


class Tree:
    """An executable in ``prefix/bin``, a home with a ``current`` install, and a library (the first
    of the adapter's names) beside the executable, in ``prefix/lib``, in the current install, and
    in a directory for the flag and one for the variable."""

    def __init__(self, root: Path, adapter: Any) -> None:
        self.adapter = adapter
        self.library: Library = adapter.LIBRARY
        self.so, self.so0 = adapter.library_names("linux")
        self.exe = touch(root / "prefix" / "bin" / f"superfluid-worker-{self.library.runtime_id}")
        self.home = root / "home"
        runtime = self.home / "runtimes" / self.library.runtime_id
        self.beside = touch(root / "prefix" / "bin" / self.so)
        self.libdir = touch(root / "prefix" / "lib" / self.so)
        touch(runtime / "1.0-cpu" / "lib" / self.so)
        os.symlink("1.0-cpu", runtime / "current")
        self.current = runtime / "current" / "lib" / self.so  # reported as reached, through current
        self.flag = touch(root / "flagdir" / self.so)
        self.env = touch(root / "envdir" / self.so)

    def lookup(self, var: str | None = None) -> Lookup:
        env = {"SUPERFLUID_HOME": str(self.home)}
        if var is not None:
            env[self.library.env] = var
        return read(env)

    def locate(self, flag: str | None = None, var: str | None = None, exe: str | None = None) -> Located:
        located: Located = self.adapter.locate(flag, self.lookup(var), executable=exe or str(self.exe),
                                               platform="linux")
        return located


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF stand-in: locate never loads")
    return path


@pytest.fixture(params=ADAPTERS)
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Tree:
    return Tree(tmp_path, request.param)


# --- who names it -------------------------------------------------------------------------------

@pytest.mark.parametrize(("flag", "var", "want", "named"), [
    pytest.param("flag", "env", "flag", "flag", id="flag-beats-variable"),
    pytest.param(None, "env", "env", "env", id="variable-beats-search"),
    pytest.param("", "", "beside", None, id="empty-flag-and-variable-are-unset"),
    pytest.param(None, None, "beside", None, id="searched"),
])
def test_who_names_it(tree: Tree, flag: str | None, var: str | None, want: str, named: str | None) -> None:
    dirs = {"flag": str(tree.flag.parent), "env": str(tree.env.parent), "": "", None: None}
    found = tree.locate(dirs[flag], dirs[var])
    by = {"flag": tree.library.flag, "env": tree.library.env, None: None}[named]
    assert (found.path, found.named) == (str(getattr(tree, want)), by)


@pytest.mark.parametrize(("present", "chosen"), [
    pytest.param(["so", "so0"], "so", id="first-name-before-second"),
    pytest.param(["so0"], "so0", id="second-name-alone"),
])
def test_a_named_directory_is_searched_under_both_names(tree: Tree, tmp_path: Path, present: list[str],
                                                        chosen: str) -> None:
    for which in present:
        touch(tmp_path / "d" / getattr(tree, which))
    found = tree.locate(str(tmp_path / "d"))
    assert found.path == str(tmp_path / "d" / getattr(tree, chosen))
    assert found.looked == (str(tmp_path / "d" / tree.so), str(tmp_path / "d" / tree.so0))


def test_a_named_file_is_used_as_named(tree: Tree, tmp_path: Path) -> None:
    odd = touch(tmp_path / "custom-engine.bin")
    found = tree.locate(None, str(odd))
    assert (found.path, found.named, found.looked) == (str(odd), tree.library.env, (str(odd),))


@pytest.mark.parametrize("by", ["flag", "variable"])
def test_a_named_directory_without_the_library_is_the_answer(tree: Tree, tmp_path: Path, by: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    name = tree.library.flag if by == "flag" else tree.library.env
    with pytest.raises(LibraryNotFound) as caught:
        tree.locate(str(empty) if by == "flag" else None, str(empty) if by == "variable" else None)
    assert caught.value.message == f"{name} names the directory {empty}, which holds neither {tree.so} nor {tree.so0}"
    assert caught.value.looked == [str(empty / tree.so), str(empty / tree.so0)]  # the search was not tried


def test_a_named_path_that_does_not_exist(tree: Tree, tmp_path: Path) -> None:
    gone = tmp_path / "gone" / tree.so
    with pytest.raises(LibraryNotFound) as caught:
        tree.locate(None, str(gone))
    assert caught.value.message == f"{tree.library.env} names {gone}, which does not exist"
    assert caught.value.fixes == (Fix.superfluid("runtime", "install", tree.library.runtime_id, does="installs it"),)
    assert caught.value.advice == f"name one with {tree.library.flag} or {tree.library.env}"


# --- the search ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("removed", "want"), [
    pytest.param([], "beside", id="beside-the-executable"),
    pytest.param(["beside"], "libdir", id="then-its-lib"),
    pytest.param(["beside", "libdir"], "current", id="then-the-current-install"),
])
def test_search_order(tree: Tree, removed: list[str], want: str) -> None:
    for which in removed:
        getattr(tree, which).unlink()
    found = tree.locate()
    assert (found.path, found.named) == (str(getattr(tree, want)), None)


def test_an_executable_reached_through_a_link_searches_beside_the_real_file(tree: Tree, tmp_path: Path) -> None:
    link = tmp_path / "shims" / tree.exe.name
    link.parent.mkdir()
    os.symlink(tree.exe, link)
    touch(link.parent / tree.so)  # beside the link: not the worker's own
    assert tree.locate(exe=str(link)).path == str(tree.beside)


def test_no_executable_searches_only_the_current_install(tree: Tree) -> None:
    found = tree.adapter.locate(None, tree.lookup(), executable="", platform="linux")
    assert found.path.endswith(f"runtimes/{tree.library.runtime_id}/current/lib/{tree.so}")
    assert len(found.looked) == 2


def test_nothing_found_names_every_place(tree: Tree) -> None:
    for which in ("beside", "libdir", "current"):
        getattr(tree, which).unlink()
    with pytest.raises(LibraryNotFound) as caught:
        tree.locate()
    e = caught.value
    dirs = [str(tree.exe.parent), str(tree.exe.parent.parent / "lib"),
            str(tree.home / "runtimes" / tree.library.runtime_id / "current" / "lib")]
    assert e.message == tree.library.missing.format(name=tree.so, dirs=", ".join(dirs))
    assert e.looked == [os.path.join(d, n) for d in dirs for n in (tree.so, tree.so0)]
    assert f"superfluid runtime install {tree.library.runtime_id}" in str(e)
