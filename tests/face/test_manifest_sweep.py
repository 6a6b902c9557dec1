"""``superfluid-manifest`` read as a stranger would (issue 35): every command and flag the docs name is
the tool's, and every bad value of every flag (negative, huge, NaN, infinite, out-of-range ports and
durations, empty) is a usage error naming the flag, exit 2, one line, no traceback, nothing written,
through the real console script. ``test_cli_sweep.py`` does the same for ``superfluid``."""

from __future__ import annotations

import argparse
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from superfluid.manifest.command import _parser
from superfluid.parser import children, walk
from tests import cli
from tests.cli import Run
from tests.conftest import ROOT

PROG = "superfluid-manifest"
TREE = _parser()
SYNOPSIS_DOC = ROOT / "docs" / "manifest-service.md"
CLI_DOC = ROOT / "docs" / "cli.md"
TIMEOUT = 30.0

#: each flag that takes a number, with the bad values tried on it (besides the empty string)
NUMBERS = {
    "--port": ["-1", "65536", "99999", "99999999999999999999999", "nan", "inf", "1.5", "eighty"],
    "--ttl": ["-5", "-0.5", "nan", "inf", "1e999", "31536001", "soon"],
    "--max-age": ["-1", "1.5", "nan", "inf", "31536001", "99999999999999999999999"],
    "--root-keys": ["-1", "0", "65", "999999999", "nan", "two"],
    "--root-threshold": ["-1", "0", "65", "999999999", "nan"],
}
#: the bad durations tried on ``--expires``
DURATIONS = ["timestamp=0s", "root=0d", "timestamp=99999999w", "root=36501d", "timestamp=-1d", "timestamp=nanh",
             "timestamp=infs", "timestamp=1.5h", "timestamp=2", "mirror=1d", "timestamp"]


def leaves() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    return {tuple(path.split()): node for path, node in walk(TREE) if path and not children(node)}


COMMANDS = sorted(leaves())


def _name(command: tuple[str, ...]) -> str:
    return " ".join((PROG, *command))


def flags(command: tuple[str, ...]) -> dict[str, argparse.Action]:
    """The long flags of ``command`` (help aside), each with its action."""
    return {o: a for a in leaves()[command]._actions for o in a.option_strings
            if o.startswith("--") and not isinstance(a, argparse._HelpAction)}


def documented_synopsis() -> dict[tuple[str, ...], set[str]]:
    """docs/manifest-service.md's synopsis ("Running it"): each command's flags."""
    text = SYNOPSIS_DOC.read_text()
    block = text[text.index("## Running it"):].split("```")[1]
    found: dict[tuple[str, ...], set[str]] = {}
    command: tuple[str, ...] = ()
    for line in block.strip().splitlines():
        if line.startswith(PROG):
            words = line.split()[1:]
            command = tuple(w for w in words[:2] if w in {"keys", "init"}) or (words[0],)
        found.setdefault(command, set()).update(re.findall(r"--[a-z][a-z-]*", line))
    return found


def cli_section() -> str:
    """docs/cli.md's section on the tool."""
    text = CLI_DOC.read_text()
    start = text.index(f"## `{PROG} ")
    return text[start:text.index("\n## ", start + 1)]


def test_every_command_and_flag_of_the_tool_is_in_the_docs_and_no_other() -> None:
    synopsis = documented_synopsis()
    assert sorted(synopsis) == COMMANDS
    for command in COMMANDS:
        assert synopsis[command] == set(flags(command)), command
    section = cli_section()
    for command in COMMANDS:
        assert f"`{' '.join(command)}" in section or f"{command[0]}|" in section, command
        for flag in flags(command):
            assert f"{flag}" in section, (command, flag)


def test_every_numeric_flag_is_swept() -> None:
    """A flag that reads a value (a ``type``) is in NUMBERS, or is ``--expires``: a new one joins the sweep."""
    typed = {o for c in COMMANDS for o, a in flags(c).items() if a.type is not None}
    assert typed == set(NUMBERS) | {"--expires"}


def _fill(action: argparse.Action, scratch: Path) -> str:
    return "oci://127.0.0.1:9/x" if action.dest == "to" else str(scratch / action.dest)


def required(command: tuple[str, ...], scratch: Path) -> list[str]:
    """The positionals and required flags of ``command``, filled with paths that are never made."""
    argv: list[str] = []
    for action in leaves()[command]._actions:
        if action.option_strings and action.required:
            argv += [action.option_strings[-1], _fill(action, scratch)]
        elif not action.option_strings and action.dest != "help":
            argv.append(_fill(action, scratch))
    return argv


def bad_values(command: tuple[str, ...]) -> list[tuple[str, str]]:
    """(flag, bad value) for every flag of ``command`` that takes one."""
    out: list[tuple[str, str]] = []
    for flag, action in flags(command).items():
        if action.nargs == 0 or isinstance(action, (argparse._StoreTrueAction, argparse._VersionAction)):
            continue
        out.append((flag, ""))
        out += [(flag, v) for v in NUMBERS.get(flag, [])]
        if flag == "--expires":
            out += [(flag, v) for v in DURATIONS]
    return out


CASES = [(c, flag, value) for c in COMMANDS for flag, value in bad_values(c)]
Case = tuple[tuple[str, ...], str, str]


def run(home: Path, cwd: Path, *argv: str) -> Run:
    return cli.run(PROG, *argv, env=cli.environment(home), cwd=cwd, timeout=TIMEOUT, new_session=True)


@pytest.fixture(scope="module")
def manifest_bad_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Case, tuple[Run, list[str]]]:
    """Every bad value of every flag, each in a fresh home and folder, in parallel: the run and every
    path it left there (there was none)."""
    top = tmp_path_factory.mktemp("manifest-bad")

    def one(i: int, command: tuple[str, ...], flag: str, value: str) -> tuple[Case, tuple[Run, list[str]]]:
        home, scratch = top / f"home{i}", top / f"scratch{i}"
        home.mkdir()
        scratch.mkdir()
        done = run(home, scratch, *command, *required(command, scratch), flag, value)
        left = [str(p.relative_to(top)) for p in sorted(home.rglob("*"))] + \
               [str(p.relative_to(top)) for p in sorted(scratch.rglob("*"))]
        return (command, flag, value), (done, left)

    with ThreadPoolExecutor(max_workers=6) as pool:
        return dict(pool.map(lambda c: one(*c), [(i, *c) for i, c in enumerate(CASES)]))


@pytest.mark.parametrize(("command", "flag", "value"), CASES,
                         ids=[f"{' '.join(c)} {f} {v!r}"[:90] for c, f, v in CASES])
def test_a_bad_value_is_a_usage_error_naming_the_flag(
        manifest_bad_runs: dict[Case, tuple[Run, list[str]]], command: tuple[str, ...],
        flag: str, value: str) -> None:
    done, left = manifest_bad_runs[(command, flag, value)]
    assert done.code == 2, (done.code, done.stderr[-600:])
    assert "Traceback" not in done.stderr and done.stdout == ""
    line = done.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"{PROG}: "), line
    assert f"argument {flag}:" in line, line
    assert line.endswith(f"(see '{_name(command)} --help')"), line
    assert left == []


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_an_unknown_flag_is_a_usage_error_of_its_own_page(tmp_path: Path, command: tuple[str, ...]) -> None:
    done = run(tmp_path, tmp_path, *command, *required(command, tmp_path / "x"), "--no-such-flag")
    assert done.code == 2 and "Traceback" not in done.stderr and done.stdout == "", done.stderr
    assert done.stderr == f"{PROG}: unrecognized arguments: --no-such-flag (see '{_name(command)} --help')\n"
