from __future__ import annotations

from pathlib import Path

import pytest

from superfluid import __version__
from superfluid.cli import main
from tests import cli


def test_no_arguments_prints_overview_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "runtime install [<id>]" in err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "runtimes [<model>] [--json]" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"superfluid {__version__}\n"


@pytest.mark.parametrize("argv", [
    ["bogus"], ["runtime"], ["runtime", "install"], ["runtimes", "--nope"], ["runtime", "versions"],
    ["--json"],
])
def test_usage_errors_exit_2_with_one_clear_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("superfluid: ") and "Traceback" not in err


def test_installed_console_script_runs(sf_home: Path) -> None:
    done = cli.run("superfluid", "version", env=cli.environment(sf_home))
    assert done.code == 0 and done.stdout == f"superfluid {__version__}\n"
