"""``-q/--quiet`` and ``-v/--verbose`` (issue 42, item 27): taken before the command and by every
command, setting what ``superfluid.verbosity`` answers; both on one line is a usage error (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid import verbosity
from superfluid.parser import children, parser, walk
from superfluid.runtime.kernel.errors import UsageError
from tests import cli

TREE = dict(walk(parser()))
LEAVES = [path for path, node in TREE.items() if path and not children(node)]


@pytest.mark.parametrize("path", LEAVES)
@pytest.mark.parametrize(("flag", "level"), [("-q", verbosity.QUIET), ("--quiet", verbosity.QUIET),
                                             ("-v", verbosity.VERBOSE), ("--verbose", verbosity.VERBOSE)])
def test_every_command_takes_quiet_and_verbose(path: str, flag: str, level: int) -> None:
    assert flag in TREE[path]._option_string_actions, path
    assert "-q" in TREE[""]._option_string_actions and "--verbose" in TREE[""]._option_string_actions
    verbosity.reset()
    TREE[path]._option_string_actions[flag](TREE[path], type("N", (), {})(), [], flag)
    assert verbosity.level() == level
    verbosity.reset()


@pytest.mark.parametrize("line", [["-q", "runtimes"], ["runtimes", "-q"], ["--quiet", "runtime", "list", "basert"],
                                  ["runtime", "list", "basert", "--quiet"]], ids=" ".join)
def test_quiet_before_or_after_the_command(line: list[str]) -> None:
    top = parser(line)
    top.parse_known_args(line)
    assert verbosity.quiet() and not verbosity.verbose()
    parser(["runtimes"]).parse_known_args(["runtimes"])  # a new line starts at normal
    assert verbosity.level() == verbosity.NORMAL


def test_both_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="-q/--quiet and -v/--verbose ask opposite things"):
        parser(["runtimes"]).parse_known_args(["-q", "runtimes", "-v"])
    verbosity.reset()
    done = cli.run("superfluid", "-q", "runtimes", "--verbose", env=cli.environment(tmp_path))
    assert done.code == 2 and "ask opposite things" in done.stderr and done.stdout == ""


def test_a_quiet_line_answers_as_a_plain_one(tmp_path: Path) -> None:
    plain = cli.run("superfluid", "runtimes", "--json", env=cli.environment(tmp_path))
    quiet = cli.run("superfluid", "-q", "runtimes", "--json", env=cli.environment(tmp_path))
    assert (quiet.code, quiet.stdout) == (plain.code, plain.stdout) == (0, plain.stdout)
