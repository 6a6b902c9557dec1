"""Every hint is a value whose command exists (issues 15 and 42).

Read from the source: every ``Fix.superfluid(...)`` call's literal words must name a command of
``superfluid`` and only flags of that command (or a runtime option as ``runtime check`` and ``serve``
spell them); and no string of the product code that is not a docstring writes a ``superfluid``
command into prose between backticks: a command a user is told to run is a ``Fix``, which the suite
pastes (tests/cli.py, scripts/fix-report). Then ``runtime check`` is run with the flags the library
hints name, and its report's ``named`` says which flag was given.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.manifest.command import _parser as manifest_parser
from superfluid.parser import children, find, parser, walk
from superfluid.runtime import registry
from tests import cli
from tests.conftest import ROOT

_SOURCES = ("superfluid", "installer", "runtime", "manifest")
_PROSE_COMMAND = re.compile(r"`superfluid(-manifest)? [^`]*`")


def _files() -> Iterator[tuple[Path, ast.Module]]:
    for top in _SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string nodes that are docstrings (or bare string statements)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            out.add(id(node.value))
    return out


def fix_calls() -> Iterator[tuple[str, list[str]]]:
    """``(where, literal words)`` of every ``Fix.superfluid(...)`` call: its leading string arguments."""
    for path, tree in _files():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "superfluid" and isinstance(node.func.value, ast.Name) and \
                    node.func.value.id == "Fix":
                words = []
                for arg in node.args:
                    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                        break
                    words.append(arg.value)
                yield f"{path.relative_to(ROOT)}:{node.lineno}", words


#: where a backticked command is a help page's words (what a command is, how a completion script was made), not a
#: hint
_HELP_WORDS = re.compile(r"help|usage|completion|_page|^_(BASH|ZSH|FISH)$", re.IGNORECASE)


class _Prose(ast.NodeVisitor):
    """Strings holding a backticked command, outside docstrings and help pages (a function, constant or
    keyword named for help, usage or completion)."""

    def __init__(self, docs: set[int]) -> None:
        self.docs = docs
        self.context: list[str] = []
        self.found: list[tuple[int, str]] = []

    def _within(self, name: str, node: ast.AST) -> None:
        self.context.append(name)
        self.generic_visit(node)
        self.context.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._within(node.name, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._within(" ".join(t.id for t in node.targets if isinstance(t, ast.Name)), node)

    def visit_keyword(self, node: ast.keyword) -> None:
        self._within(node.arg or "", node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docs and _PROSE_COMMAND.search(node.value) \
                and not any(_HELP_WORDS.search(c) for c in self.context):
            self.found.append((node.lineno, node.value.strip()[:100]))


def prose_commands() -> Iterator[str]:
    """``where: text`` of each string of the code (not a docstring, not a help page) holding a
    backticked command."""
    for path, tree in _files():
        visitor = _Prose(_docstrings(tree))
        visitor.visit(tree)
        yield from (f"{path.relative_to(ROOT)}:{line}: {text}" for line, text in visitor.found)


def _option_spellings() -> set[str]:
    """``--<option>`` (runtime check, the worker) and ``--<id>-<option>`` (serve, runtime check)."""
    out = set()
    for rid in registry.IDS:
        for option in registry.get(rid).options():
            out |= {f"--{option.name}", f"--{rid}-{option.name}"}
    return out


FIXES = list(fix_calls())


def test_the_scan_finds_the_fixes() -> None:
    assert len(FIXES) > 10
    assert all(words for _, words in FIXES), [w for w, words in FIXES if not words]


def test_no_command_is_written_into_prose() -> None:
    assert list(prose_commands()) == []


def _leaf(words: list[str]) -> tuple[str, list[str]]:
    """The command path the words name, and the words after it."""
    path: list[str] = []
    node = parser()
    while words and words[0] in children(node):
        path.append(words[0])
        node = children(node)[words.pop(0)]
    return " ".join(path), words


@pytest.mark.parametrize(("where", "words"), FIXES, ids=[w for w, _ in FIXES])
def test_every_fix_names_a_command_with_its_flags(where: str, words: list[str]) -> None:
    path, rest = _leaf(list(words))
    leaf = find(parser(), path)
    assert leaf is not None and path and not children(leaf), f"{where}: {words} names no command"
    flags = {s for a in leaf._actions for s in a.option_strings}
    if path in ("runtime check", "serve"):
        flags |= _option_spellings() | {"--model", "--json"}
    wrong = [w for w in rest if w.startswith("--") and w.split("=")[0] not in flags]
    assert wrong == [], f"{where}: {path} takes no {wrong}"


def test_every_manifest_fix_names_its_flags() -> None:
    flags = {s for _, p in walk(manifest_parser()) for a in p._actions for s in a.option_strings}
    for path, tree in _files():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Fix" and \
                    node.args and isinstance(node.args[0], ast.Tuple):
                words = [e.value for e in node.args[0].elts if isinstance(e, ast.Constant)]
                if words[:1] == ["superfluid-manifest"]:
                    wrong = [w for w in words if w.startswith("--") and w.split("=")[0] not in flags]
                    assert wrong == [], f"{path}:{node.lineno}: superfluid-manifest takes no {wrong}"


# --- runtime check takes the flags the library hints name, and says which was given --------------------------


def _check(home: Path, *argv: str) -> tuple[int, dict[str, object], str]:
    done = cli.run("superfluid", "runtime", "check", *argv, "--json", env=cli.environment(home), timeout=60)
    return done.code, json.loads(done.stdout), done.stderr


@pytest.mark.parametrize(("runtime_id", "flag"), [
    ("basert", "--basert-lib"), ("basert", "--lib"), ("llamacpp", "--llamacpp-lib"), ("llamacpp", "--lib"),
])
def test_runtime_check_takes_the_library_flag_hints_name(tmp_path: Path, runtime_id: str, flag: str) -> None:
    code, report, err = _check(tmp_path, runtime_id, flag, str(tmp_path / "nope"))
    assert code == 1, err  # not a usage error: the flag exists
    assert report["named"] == flag
    assert str(report["available"]).startswith(f"{flag} names {tmp_path / 'nope'}, which does not exist")
    assert f"superfluid: {flag} names" in err


def test_runtime_check_with_a_real_library_named_either_way(tmp_path: Path) -> None:
    from tests.end_to_end.releases import engine_lib

    lib = str(engine_lib("0.4.0"))
    for flag in ("--basert-lib", "--lib"):
        code, report, err = _check(tmp_path, "basert", f"{flag}={lib}")
        assert (code, report["available"], report["named"]) == (0, True, flag), err


def test_both_spellings_at_once_is_a_usage_error(tmp_path: Path) -> None:
    done = cli.run("superfluid", "runtime", "check", "llamacpp", "--lib", "a", "--llamacpp-lib", "b",
                   env=cli.environment(tmp_path), timeout=60)
    assert done.code == 2
    assert "--llamacpp-lib and --lib name the same option: give one" in done.stderr
