"""Tests mirror modules (issue 30, item 7): every module has its own test file, found by its name.

- ``runtime/<m>.py`` is tested by ``tests/runtime/test_<m>.py``, a module of the runtime's own
  sub-packages (``runtime/kernel/``, ``runtime/hostfacts/``, ``runtime/serving/``) by
  ``tests/runtime/<package>/test_<m>.py``; an engine's folder ``runtime/<id>/`` (the one holding a
  ``recipe.json``) by ``tests/<id>/`` (beside its native fixtures).
- ``installer/`` and ``manifest/`` are mirrored folder for folder, sub-packages included:
  ``installer/cache/blobs.py`` by ``tests/installer/cache/test_blobs.py``, ``manifest/choose.py`` by
  ``tests/manifest/test_choose.py``.
- A package's ``__init__.py`` needs no test file, and may hold no rule (no function, no class) to
  test: code belongs in a module named for it.
- The other way round: a test file named for a module sits where that module is mirrored, so one
  left behind when its module moved fails here. Files named for a behaviour (an attack, an end to end
  run) may sit beside the mirrors.
- The face (``superfluid/`` and ``superfluid/commands/``) is not mirrored module by module: a command
  is what a person types, and it is tested through the real command line in files named for what they
  check (``tests/face/test_help.py``, ``test_json_errors.py``, ``test_hints.py``; ``tests/end_to_end``,
  ``tests/fleet``, ``tests/serve`` for the commands' work), where one file checks every command at once.

Every list here is read from the folders, so a module added, moved or split is checked as it is.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: the packages whose modules are mirrored, each with its sub-packages
PACKAGES = ("runtime", "installer", "manifest")

#: modules (not ``__init__.py``) that hold no decision, each with the reason: they need no test file
ALLOWED: dict[str, str] = {}


def mirror_folder(folder: str) -> str:
    """The tests folder that mirrors a package folder: ``runtime/basert`` -> ``tests/basert``,
    ``runtime/kernel`` -> ``tests/runtime/kernel``, ``installer/sources/oci`` -> ``tests/installer/sources/oci``."""
    parts = folder.split("/")
    if parts[0] == "runtime" and len(parts) > 1 and (ROOT / folder / "recipe.json").is_file():  # an engine's folder
        return "/".join(["tests", *parts[1:]])
    return "/".join(["tests", *parts])


@cache
def package_folders() -> list[str]:
    """Every package folder (one holding ``__init__.py``) of the mirrored packages."""
    return sorted(init.parent.relative_to(ROOT).as_posix()
                  for top in PACKAGES for init in (ROOT / top).rglob("__init__.py"))


@cache
def modules() -> list[str]:
    return [f"{folder}/{m.name}" for folder in package_folders() for m in sorted((ROOT / folder).glob("*.py"))]


def mirror(module: str) -> str:
    folder, name = module.rsplit("/", 1)
    return f"{mirror_folder(folder)}/test_{name}"


def _defines(path: Path) -> list[str]:
    """The functions and classes a module defines at its top level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


@pytest.mark.parametrize("module", [m for m in modules() if m not in ALLOWED and not m.endswith("/__init__.py")])
def test_each_module_has_its_test_file(module: str) -> None:
    assert (ROOT / mirror(module)).is_file(), f"{module} has no {mirror(module)}"


@pytest.mark.parametrize("init", [m for m in modules() if m.endswith("/__init__.py")])
def test_a_package_marker_holds_no_rule(init: str) -> None:
    assert _defines(ROOT / init) == [], f"{init} defines code: move it into a module named for it, tested by its mirror"


def test_the_allow_list_names_modules_without_tests() -> None:
    for module in ALLOWED:
        assert (ROOT / module).is_file(), f"{module} is allowed but does not exist: drop it from ALLOWED"
        assert not (ROOT / mirror(module)).is_file(), f"{module} has {mirror(module)}: drop it from ALLOWED"


def _test_files() -> list[str]:
    """Every ``test_*.py`` under the tests folders that mirror packages (the folders of packages gone too)."""
    tops = {mirror_folder(folder) for folder in package_folders() if folder.count("/") <= 1}
    return sorted({p.relative_to(ROOT).as_posix() for top in tops for p in (ROOT / top).rglob("test_*.py")})


@pytest.mark.parametrize("test_file", _test_files())
def test_a_test_named_for_a_module_sits_at_its_mirror(test_file: str) -> None:
    mirrors = {mirror(m): m for m in modules()}
    if test_file in mirrors:
        return
    name = test_file.rsplit("/", 1)[1].removeprefix("test_")
    homes = [m for m in modules() if m.rsplit("/", 1)[1] == name]
    assert homes == [], (f"{test_file} mirrors no module of its folder, and is named for {', '.join(homes)}: "
                         f"move it to {', '.join(mirror(m) for m in homes)} (or name it for what it tests)")


def test_every_package_folder_is_mirrored() -> None:
    folders = package_folders()
    assert {"runtime/basert", "runtime/llamacpp", "runtime/mlx", "installer/cache", "manifest"} <= set(folders)
    for folder in folders:
        assert (ROOT / mirror_folder(folder)).is_dir(), f"{folder} has no tests folder {mirror_folder(folder)}"


@pytest.mark.parametrize(("module", "test_file"), [
    ("runtime/planning.py", "tests/runtime/test_planning.py"),
    ("runtime/basert/abi.py", "tests/basert/test_abi.py"),
    ("runtime/kernel/receipt.py", "tests/runtime/kernel/test_receipt.py"),
    ("installer/install.py", "tests/installer/test_install.py"),
    ("installer/cache/blobs.py", "tests/installer/cache/test_blobs.py"),
    ("installer/sources/oci/ref.py", "tests/installer/sources/oci/test_ref.py"),
    ("manifest/choose.py", "tests/manifest/test_choose.py"),
], ids=["runtime", "engine", "runtime-sub-package", "installer-top", "installer-sub-package", "installer-nested",
        "manifest"])
def test_the_mirror_of_a_module(module: str, test_file: str) -> None:
    assert mirror(module) == test_file


def _fixtures(path: Path) -> list[str]:
    """The names of the fixtures a test module or conftest defines at its top level."""

    def is_fixture(d: ast.expr) -> bool:
        target = d.func if isinstance(d, ast.Call) else d
        return isinstance(target, ast.Attribute) and target.attr == "fixture"

    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(map(is_fixture, n.decorator_list))]


def test_each_fixture_is_defined_once() -> None:
    """A fixture name means one thing across the suite: shared ones live in a conftest.py, the others are
    named for what they hold."""
    where: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for name in _fixtures(path):
            where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
