"""``superfluid.quickparse``: the lines asked on every run get the namespace the command tree would
give them, without the tree (nor argparse) being built; every other line is left to the tree."""

from __future__ import annotations

import subprocess
import sys

import pytest

from superfluid.parser import canonical_ids, parser
from superfluid.quickparse import LINES, parse
from tests.conftest import Home


@pytest.mark.parametrize("line", LINES, ids=" ".join)
def test_a_known_line_gets_the_namespace_the_tree_gives(line: tuple[str, ...]) -> None:
    quick = parse(line)
    assert quick is not None
    tree = parser(line).parse_args(line)
    canonical_ids(tree)  # as the face does after parsing (llama.cpp is llamacpp)
    assert vars(quick) == vars(tree)


@pytest.mark.parametrize("line", [
    (), ("runtimes", "--verify"), ("runtimes", "--json", "--json"), ("runtimes", "--js"), ("runtime",),
    ("runtime", "versions"), ("runtime", "versions", "basert", "llamacpp"), ("runtime", "versions", "-x"),
    ("runtime", "versions", "basert", "--mirror", "/m"), ("runtime", "versions", "basert", "--offline"),
    ("runtime", "options", "basert", "--json", "x"), ("runtime", "check", "basert"), ("--help",),
    ("--version", "runtimes"), ("serve",),
], ids=lambda line: " ".join(line) or "nothing")
def test_any_other_line_is_left_to_the_tree(line: tuple[str, ...]) -> None:
    assert parse(line) is None


@pytest.mark.parametrize("argv", [["runtimes", "--json"], ["runtime", "versions", "llamacpp", "--json"],
                                  ["runtime", "versions", "basert"], ["runtime", "options", "basert"],
                                  ["--version"]], ids=" ".join)
def test_a_known_line_imports_neither_the_tree_nor_argparse(cli_home: Home, argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import contextlib, io, sys\n"
                               "from superfluid.cli import main\n"
                               "with contextlib.redirect_stdout(io.StringIO()):\n"
                               "    code = main(sys.argv[1:])\n"
                               "print(code, *sorted(m for m in ('argparse', 'superfluid.parser', 'superfluid.helptext',"
                               " 'tempfile', 'platform', 'subprocess') if m in sys.modules))", *argv],
        env=cli_home.env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    code, *imported = done.stdout.split()
    assert code == "0"
    assert not {"argparse", "superfluid.parser", "superfluid.helptext"} & set(imported)
    assert not {"tempfile", "platform", "subprocess"} & set(imported)  # what the answer does not need


def test_a_known_line_fails_as_the_tree_would(cli_home: Home) -> None:
    done = cli_home.superfluid("runtime", "versions", "nosuch", "--json")
    assert done.code == 2
    assert done.json()["error"]["exit"] == 2 and "no runtime 'nosuch'" in done.stderr
