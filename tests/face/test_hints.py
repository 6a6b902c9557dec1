"""Every fix hint names a flag that exists (issue 15, item 1).

The hints are read from the source: every ``fix=`` argument and every ``*FIX*`` constant of the
package (f-strings with the module's own string constants filled in). Each ``--flag`` a hint names
must be a flag of some ``superfluid`` command (or a runtime option as ``runtime check`` and
``serve`` spell them), and each backticked ``superfluid …`` command must name commands that exist
and only flags of that command. Then ``runtime check`` is run with the flags the library hints
name, and its report's ``named`` says which flag was given.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.parser import children, find, parser, walk
from superfluid.runtime import registry
from tests import cli
from tests.conftest import ROOT

_SOURCES = ("superfluid", "installer", "runtime", "manifest")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
_COMMAND = re.compile(r"`(superfluid [^`]*)`")


def _constants(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _text(node: ast.AST, constants: dict[str, str]) -> str | None:
    """A string expression's text: f-string holes are the module's constants, else ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.value.id in constants:
                parts.append(constants[v.value.id])
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, constants), _text(node.right, constants)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.IfExp):
        both = [_text(node.body, constants), _text(node.orelse, constants)]
        return " | ".join(t for t in both if t is not None) or None
    return None


def hints() -> Iterator[tuple[str, str]]:
    """``(where, hint text)`` for every fix hint in the package's source."""
    for top in _SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            constants = _constants(tree)
            for node in ast.walk(tree):
                values: list[ast.AST] = []
                if isinstance(node, ast.Call):
                    values += [k.value for k in node.keywords if k.arg == "fix"]
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and "FIX" in t.id for t in targets) and node.value is not None:
                        values.append(node.value)
                for value in values:
                    text = _text(value, constants)
                    if text:
                        yield f"{path.relative_to(ROOT)}:{getattr(value, 'lineno', '?')}", text


def _option_spellings() -> set[str]:
    """``--<option>`` (runtime check, the worker) and ``--<id>-<option>`` (serve, runtime check)."""
    out = set()
    for rid in registry.IDS:
        for option in registry.get(rid).options():
            out |= {f"--{option.name}", f"--{rid}-{option.name}"}
    return out


def _all_flags() -> set[str]:
    from superfluid.manifest.command import _parser as manifest_parser  # its hints name its own flags

    flags = set(_option_spellings()) | {"--model"}
    for top in (parser(), manifest_parser()):
        for _, p in walk(top):
            for action in p._actions:
                flags |= set(action.option_strings)
    return flags


HINTS = list(hints())


def test_the_scan_finds_the_hints() -> None:
    texts = [t for _, t in HINTS]
    assert len(HINTS) > 30
    assert any("--basert-lib" in t for t in texts) and any("--llamacpp-lib" in t for t in texts)


@pytest.mark.parametrize(("where", "hint"), HINTS, ids=[w for w, _ in HINTS])
def test_every_flag_a_hint_names_exists(where: str, hint: str) -> None:
    known = _all_flags()
    missing = [f for f in _FLAG.findall(hint) if f not in known]
    assert missing == [], f"{where}: {hint!r} names {missing}, which no superfluid command takes"


def _leaf(words: list[str]) -> tuple[str, list[str]]:
    """The command path the words name, and the words after it."""
    path: list[str] = []
    node = parser()
    while words and words[0] in children(node):
        path.append(words[0])
        node = children(node)[words.pop(0)]
    return " ".join(path), words


@pytest.mark.parametrize(("where", "hint"), [(w, h) for w, h in HINTS if _COMMAND.search(h)],
                         ids=[w for w, h in HINTS if _COMMAND.search(h)])
def test_every_command_a_hint_names_exists_with_its_flags(where: str, hint: str) -> None:
    for command in _COMMAND.findall(hint):
        path, rest = _leaf(command.split()[1:])
        leaf = find(parser(), path)
        assert leaf is not None and path and not children(leaf), f"{where}: `{command}` names no command"
        flags = {s for a in leaf._actions for s in a.option_strings}
        if path == "runtime check":
            flags |= _option_spellings() | {"--model", "--json"}
        wrong = [f for f in _FLAG.findall(" ".join(rest)) if f not in flags]
        assert wrong == [], f"{where}: `{command}`: {path} takes no {wrong}"


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
