"""Tests mirror modules: every module of ``runtime/`` (and of each engine's folder) and of
``installer/`` has its own ``tests/<package>/test_<module>.py``, unless the allow-list below says
why it holds no rule to test."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: (package folder, the tests folder that mirrors it); an engine's folder ``runtime/<id>/`` is
#: mirrored by ``tests/<id>/``
PACKAGES = [("runtime", "tests/runtime"), ("installer", "tests/installer")] + [
    (f"runtime/{p.name}", f"tests/{p.name}") for p in sorted((ROOT / "runtime").iterdir())
    if (p / "__init__.py").is_file()]

#: modules that hold no decision, each with the reason: they need no test file of their own
ALLOWED = {
    "runtime/__init__.py": "the package marker, one docstring",
    "installer/__init__.py": "the package marker, one docstring",
    "runtime/basert/__init__.py": "the package marker, one docstring",
    "runtime/llamacpp/__init__.py": "the package marker, one docstring",
    "runtime/mlx/__init__.py": "the package marker, one docstring",
}


def modules() -> list[str]:
    return [f"{folder}/{m.name}" for folder, _ in PACKAGES for m in sorted((ROOT / folder).glob("*.py"))]


def mirror(module: str) -> str:
    folder, name = module.rsplit("/", 1)
    tests = dict(PACKAGES)[folder]
    return f"{tests}/test_{name}"


@pytest.mark.parametrize("module", [m for m in modules() if m not in ALLOWED])
def test_each_module_has_its_test_file(module: str) -> None:
    assert (ROOT / mirror(module)).is_file(), f"{module} has no {mirror(module)}"


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_the_allow_list_names_modules_that_exist(module: str) -> None:
    assert (ROOT / module).is_file(), f"{module} is allowed but does not exist: drop it from ALLOWED"
    assert not (ROOT / mirror(module)).is_file(), f"{module} has {mirror(module)}: drop it from ALLOWED"


def test_every_engine_folder_is_mirrored() -> None:
    engines = {folder for folder, _ in PACKAGES if folder.startswith("runtime/")}
    assert {"runtime/basert", "runtime/llamacpp", "runtime/mlx"} <= engines
    for folder, tests in PACKAGES:
        assert (ROOT / tests).is_dir(), f"{folder} has no tests folder {tests}"


def _fixtures(path: Path) -> list[str]:
    """The names of the fixtures a test module or conftest defines at its top level."""
    import ast

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
