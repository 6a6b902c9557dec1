"""The import graph of superfluid's own modules, read from the source (issue 30): no cycle among
them, counting every import wherever it sits, those under ``if TYPE_CHECKING:`` too (a cycle is a
design error, never hidden by deferring an import or by importing for types alone: issue 43), and
our own modules imported inside functions only where the allow-list says why.

ruff enforces the same rule per file (PLC0415, TID253: pyproject.toml); this test sees the whole
graph, which ruff does not, and import-linter (scripts/import-contracts) checks the layers."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the package's folders (pyproject.toml's package-dir) and the dotted name each is imported by
FOLDERS = {"superfluid": "superfluid", "installer": "superfluid.installer", "runtime": "superfluid.runtime",
           "manifest": "superfluid.manifest"}
#: files that may import our own modules inside a function, each with why (the dispatch imports a
#: command's module, and the registry an adapter, by ``import_module``: no import statement)
ALLOWED_INSIDE: dict[str, str] = {}
#: at most this many imports of our own modules inside functions (issue 30)
MAX_INSIDE = 40


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, dotted in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if folder == "superfluid" and parts and parts[0] in FOLDERS:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([dotted, *parts])] = path
    return found


MODULES = modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The modules of ours that ``node`` in ``module`` imports."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".")
            if MODULES[module].name != "__init__.py":
                package.pop()
            base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name.startswith("superfluid"):
            yield name


def _imports(module: str) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import of ours in ``module``, those
    under ``if TYPE_CHECKING:`` included (not run, but a cycle of types is a cycle of ideas)."""
    tree = ast.parse(MODULES[module].read_text())

    def walk(node: ast.AST, inside: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield from ((t, child.lineno, inside) for t in _targets(module, child))
            else:
                yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    yield from walk(tree, False)


def graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m) if t != m} for m in MODULES}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize(("edges", "expected"), [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
], ids=["two", "three-and-a-tail", "none"])
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


def test_our_modules_are_imported_at_the_top() -> None:
    inside = [(MODULES[m].relative_to(ROOT).as_posix(), line, t)
              for m in MODULES for t, line, is_inside in _imports(m) if is_inside]
    assert [i for i in inside if i[0] not in ALLOWED_INSIDE] == []
    assert len(inside) <= MAX_INSIDE


def test_the_graph_reader_sees_an_import_inside_a_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test of the reader itself: a deferred import is found, and so is one under TYPE_CHECKING."""
    path = tmp_path / "probe.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import superfluid.cli\n"
                    "def f():\n    from superfluid.runtime import registry\n")
    monkeypatch.setitem(MODULES, "superfluid.probe", path)
    assert list(_imports("superfluid.probe")) == [("superfluid.cli", 3, False),
                                                  ("superfluid.runtime.registry", 5, True)]


def test_a_cycle_of_types_alone_is_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two modules that import each other, one of them only under TYPE_CHECKING, make a cycle."""
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("from superfluid.two import B\n")
    two.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from superfluid.one import A\n")
    monkeypatch.setitem(MODULES, "superfluid.one", one)
    monkeypatch.setitem(MODULES, "superfluid.two", two)
    edges = {m: {t for t, _, _ in _imports(m)} for m in ("superfluid.one", "superfluid.two")}
    assert cycles(edges) == [["superfluid.one", "superfluid.two"]]
