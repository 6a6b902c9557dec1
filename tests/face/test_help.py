"""``--help`` on every command (issue 15, item 2): each command of the tree answers ``--help`` (and
``-h``) with exit 0 on stdout: what it does, every flag with words, an example or two, and its exit
codes; ``runtime check <id> --help`` also lists that runtime's options; the overview names every
command; a usage error points at its own command's help."""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from superfluid.cli import main
from superfluid.parser import Parser, children, parser, walk
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from tests import cli

TREE = dict(walk(parser()))
COMMANDS = [path for path in TREE if path]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_every_command_of_the_tree_has_a_help_page() -> None:
    """A command added without its page (its module's ``HELP``) is named here."""
    assert sorted(p for p in COMMANDS if not isinstance(TREE[p], Parser) or TREE[p].page is None) == []
    assert "runtime check" in COMMANDS and "completion" in COMMANDS


@pytest.mark.parametrize("path", COMMANDS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_on_every_command(path: str, flag: str) -> None:
    code, out, err = _run([*path.split(), flag])
    assert (code, err) == (0, "")
    assert out.startswith("usage: superfluid " + path)
    page = TREE[path].page  # type: ignore[attr-defined]
    assert re.sub(r"\s+", " ", page.description)[:60] in re.sub(r"\s+", " ", out)
    examples = out.index("examples:\n")
    exits = out.index("exit codes:\n")
    assert examples < exits
    assert all(f"  {e}" in out for e in page.examples) and page.examples
    assert re.search(r"^  0  ", out[exits:], re.M) and re.search(r"^  2  ", out[exits:], re.M)


@pytest.mark.parametrize("path", COMMANDS)
def test_every_flag_and_argument_has_words(path: str) -> None:
    """Each flag says what it does; a flag not listed among them (serve's runtime options beyond those the
    host contract names) is listed with its words below the page."""
    node = TREE[path]
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert all(c.help for c in action._choices_actions), path
            continue
        if action.help == argparse.SUPPRESS:
            assert path == "serve" and re.search(rf"^  {action.option_strings[0]} V ", node.format_help(), re.M)
            continue
        assert action.help, f"{path}: {action.option_strings or action.dest}"


@pytest.mark.parametrize("runtime_id", registry.IDS)
def test_runtime_check_id_help_lists_that_runtimes_options(runtime_id: str) -> None:
    """It answered 'superfluid: --help needs a value' (exit 2) before."""
    code, out, err = _run(["runtime", "check", runtime_id, "--help"])
    assert (code, err) == (0, "")
    assert out.startswith("usage: superfluid runtime check") and "exit codes:" in out
    for option in registry.get(runtime_id).options():
        assert re.search(rf"^\s+--{re.escape(option.name)}\s", out, re.M), option.name
    assert f"--{runtime_id}-<option>" in out
    code, out, err = _run(["runtime", "check", runtime_id, "--model", "m.gguf", "-h"])
    assert code == 0 and "options of" in out


def test_runtime_check_help_of_an_unknown_runtime_is_a_usage_error() -> None:
    code, out, err = _run(["runtime", "check", "nope", "--help"])
    assert code == 2 and out == "" and "no runtime 'nope'" in err


def test_the_overview_names_every_command_and_the_exit_codes() -> None:
    code, out, err = _run(["--help"])
    assert (code, err) == (0, "")
    for path, node in TREE.items():
        if path and not children(node):
            assert re.search(rf"^  {re.escape(path)}\b", out, re.M), path
    assert "Exit codes: 0 done, 1 run-time failure, 2 usage error" in out
    code, out2, err2 = _run([])
    assert code == 2 and out2 == "" and err2 == out  # no command: the same overview, on stderr


@pytest.mark.parametrize("group", [p for p in COMMANDS if children(TREE[p])])
def test_a_group_page_lists_each_of_its_commands(group: str) -> None:
    """``superfluid cache --help`` lists ``dir``, ``du`` and ``prune`` (issue 42, item 2: it listed ``dir``
    alone), as every group lists every command under it, and the overview every command."""
    code, out, err = _run([*group.split(), "--help"])
    assert (code, err) == (0, "")
    listed = out[out.index("<command>\n"):out.index("options:")]
    for name, node in children(TREE[group]).items():
        page = node.page  # type: ignore[attr-defined]
        assert re.search(rf"^    {re.escape(name)}\s+{re.escape(page.summary[:30])}", listed, re.M), (name, listed)


@pytest.mark.parametrize("path", [p for p in COMMANDS if children(TREE[p]) == {}])
def test_a_usage_error_points_at_its_own_help(path: str) -> None:
    code, out, err = _run([*path.split(), "--no-such-flag"])
    assert code == 2 and out == ""
    assert err.endswith(f"(see 'superfluid {path} --help')\n") or (
        path == "runtime check" and "--help" in err), err


@pytest.mark.parametrize("columns", ["120", "", "0", "wide", "-5"])
def test_help_is_as_wide_as_shutil_says_the_terminal_is(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The formatter's width is ``shutil.get_terminal_size``'s (``COLUMNS``, else the terminal, else
    80), found without importing ``shutil`` on every command."""
    import shutil

    from superfluid.parser import _columns

    monkeypatch.setenv("COLUMNS", columns)
    assert _columns() == shutil.get_terminal_size().columns


def test_a_tree_for_one_command_names_the_groups_it_does_not_load() -> None:
    """``runtimes``' tree builds no parser for ``runtime``, ``mirror`` or ``cache``: they are named only."""
    top = parser(["runtimes", "--json"])
    named = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))._name_parser_map
    assert isinstance(named["runtimes"], Parser)
    assert {g for g in ("runtime", "mirror", "cache") if not isinstance(named[g], Parser)} == {"runtime", "mirror",
                                                                                               "cache"}


def _parsed(tree: Parser, line: list[str]) -> tuple[str, str]:
    try:
        args, extra = tree.parse_known_args(line)
    except UsageError as e:
        return "refused", str(e)
    return "parsed", repr((sorted(vars(args).items(), key=str), extra))


@pytest.mark.parametrize("line", [
    ["runtime", "instal", "basert"], ["runtime"], ["runtime", "--json", "list"], ["nosuch", "runtimes"],
    ["--json", "runtimes"], ["-1", "runtimes"], ["--", "runtimes"], ["cache", "du", "runtime"], ["--version"],
    ["-V", "runtime", "versions", "basert"],
], ids=" ".join)
def test_a_line_is_parsed_once_by_the_tree_its_words_name(line: list[str]) -> None:
    """The tree ``parser`` makes for a line parses it as the whole tree does, a typo in a command or a
    group included (argparse names every choice of the group: they are all named)."""
    assert _parsed(parser(line), line) == _parsed(parser(None), line)


def test_a_command_line_does_not_import_shutil(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import contextlib, io, sys\n"
                               "from superfluid.cli import main\n"
                               "with contextlib.redirect_stdout(io.StringIO()):\n"
                               "    code = main(['runtimes', '--json'])\n"
                               "print(code, 'shutil' in sys.modules)"],
        env=cli.environment(tmp_path), capture_output=True, text=True, check=False,
        timeout=60)
    assert done.stdout.split() == ["0", "False"], done.stderr
