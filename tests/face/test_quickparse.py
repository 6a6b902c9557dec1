"""``superfluid.quickparse``: ``runtime versions <id> [--json]``, asked on every run, gets the namespace
the command tree would give it without the tree being built, and is answered from what the runtime
declares (``superfluid.declarations``) without the ``--for`` and release-listing machinery of its
command's module; every other line is left to the tree."""

from __future__ import annotations

import subprocess
import sys

import pytest

from superfluid.parser import canonical_ids, parser
from superfluid.quickparse import parse
from tests.conftest import Home

#: example lines of every form ``parse`` answers (each parsed with the tree too)
LINES: tuple[tuple[str, ...], ...] = (
    ("runtime", "versions", "basert"), ("runtime", "versions", "llamacpp", "--json"),
    ("runtime", "versions", "--json", "mlx"), ("runtime", "versions", "nosuch", "--json"),
    ("runtime", "versions", "llama.cpp", "--json"),
)


@pytest.mark.parametrize("line", LINES, ids=" ".join)
def test_a_known_line_gets_the_namespace_the_tree_gives(line: tuple[str, ...]) -> None:
    quick = parse(line, {})
    assert quick is not None and quick.module == "superfluid.declarations"
    tree = parser(line).parse_args(line)
    canonical_ids(tree)  # as the face does after parsing (llama.cpp is llamacpp)
    assert vars(quick.args) == vars(tree)


@pytest.mark.parametrize("line", [
    (), ("runtimes",), ("runtimes", "--json"), ("--version",), ("runtime",), ("runtime", "versions"),
    ("runtime", "versions", "basert", "llamacpp"), ("runtime", "versions", "-x"),
    ("runtime", "versions", "basert", "--mirror", "/m"), ("runtime", "versions", "basert", "--offline"),
    ("runtime", "versions", "basert", "--json", "x"), ("runtime", "options", "basert"), ("runtime", "check", "basert"),
    ("--help",), ("serve",),
], ids=lambda line: " ".join(line) or "nothing")
def test_any_other_line_is_left_to_the_tree(line: tuple[str, ...]) -> None:
    assert parse(line, {}) is None


@pytest.mark.parametrize("variable", ["SUPERFLUID_FOR", "SUPERFLUID_MIRROR"])
def test_a_line_the_environment_asks_more_of_is_left_to_the_tree(variable: str) -> None:
    """``SUPERFLUID_FOR`` plans for another release, ``SUPERFLUID_MIRROR`` adds the listing's choice."""
    assert parse(("runtime", "versions", "basert"), {variable: "x"}) is None
    assert parse(("runtime", "versions", "basert"), {variable: ""}) is not None


@pytest.mark.parametrize("argv", [["runtime", "versions", "llamacpp", "--json"], ["runtime", "versions", "basert"]],
                         ids=" ".join)
def test_a_known_line_imports_neither_the_installer_nor_its_command(cli_home: Home, argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import contextlib, io, sys\n"
                               "from superfluid.cli import main\n"
                               "with contextlib.redirect_stdout(io.StringIO()):\n"
                               "    code = main(sys.argv[1:])\n"
                               "print(code, *sorted(m for m in sys.modules if m.startswith(('superfluid.installer', "
                               "'superfluid.commands.', 'superfluid.manifest')) or m == 'tempfile'))", *argv],
        env=cli_home.env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    code, *imported = done.stdout.split()
    assert code == "0"
    # what the answer does not need: installing, planning, fetching, another command (the settings the
    # source flags make, superfluid.installer.config, are the face's to read: source_hints)
    assert set(imported) <= {"superfluid.installer", "superfluid.installer.config"}, imported


def test_a_known_line_fails_as_the_tree_would(cli_home: Home) -> None:
    done = cli_home.superfluid("runtime", "versions", "nosuch", "--json")
    assert done.code == 2
    assert done.json()["error"]["exit"] == 2 and "no runtime 'nosuch'" in done.stderr
