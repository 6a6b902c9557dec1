"""The dispatch's second step (``parser.runner``): a flag that makes a line another command's form
hands it to that form's module (``runtime install --locked``, ``--for``, ``SUPERFLUID_FOR``; ``runtime
versions --for``, ``--mirror``, ``--offline``), so that the plain line loads none of it."""

from __future__ import annotations

import argparse

import pytest

from superfluid.cli import _path
from superfluid.commands import install, install_for, install_locked, runtimes, versions, versions_planned
from superfluid.parser import load, parser, runner
from tests import cli
from tests.conftest import Home
from tests.loaded_modules import loaded


def _args(*line: str) -> argparse.Namespace:
    args, extra = parser(list(line)).parse_known_args(list(line))
    assert extra == []
    return args


@pytest.mark.parametrize(("line", "environ", "module"), [
    pytest.param(["runtime", "install", "basert"], {}, install, id="plain"),
    pytest.param(["runtime", "install", "basert", "--for", "0.9.0"], {}, install_for, id="for"),
    pytest.param(["runtime", "install", "basert"], {"SUPERFLUID_FOR": "0.9.0"}, install_for, id="for-by-environment"),
    pytest.param(["runtime", "install", "basert"], {"SUPERFLUID_FOR": ""}, install, id="empty-variable-is-unset"),
    pytest.param(["runtime", "install", "--locked"], {}, install_locked, id="locked-default-file"),
    pytest.param(["runtime", "install", "basert", "--locked", "x.lock"], {}, install_locked, id="locked"),
    pytest.param(["runtime", "install", "--locked", "--for", "0.9.0"], {}, install_locked,
                 id="locked-refuses-for-itself"),
    pytest.param(["runtimes"], {"SUPERFLUID_FOR": "0.9.0"}, runtimes, id="a-command-without-forms"),
    pytest.param(["runtime", "versions", "basert", "--json"], {}, versions, id="versions-plain"),
    pytest.param(["runtime", "versions", "basert", "--key", "k"], {}, versions, id="versions-key-without-for"),
    pytest.param(["runtime", "versions", "basert"], {"SUPERFLUID_FOR": "", "SUPERFLUID_MIRROR": ""}, versions,
                 id="versions-empty-variables-are-unset"),
    pytest.param(["runtime", "versions", "basert", "--for", "0.9.0"], {}, versions_planned, id="versions-for"),
    pytest.param(["runtime", "versions", "basert"], {"SUPERFLUID_FOR": "0.9.0"}, versions_planned,
                 id="versions-for-by-environment"),
    pytest.param(["runtime", "versions", "basert", "--mirror", "/m"], {}, versions_planned, id="versions-mirror"),
    pytest.param(["runtime", "versions", "basert"], {"SUPERFLUID_MIRROR": "/m"}, versions_planned,
                 id="versions-mirror-by-environment"),
    pytest.param(["runtime", "versions", "basert", "--offline"], {}, versions_planned, id="versions-offline"),
])
def test_the_form_of_a_line_runs_in_its_module(line: list[str], environ: dict[str, str], module: object) -> None:
    args = _args(*line)
    assert runner(load(_path(args)), args, environ) is module


@pytest.mark.parametrize("argv", [["runtime", "versions", "llamacpp", "--json"], ["runtime", "versions", "basert"]],
                         ids=" ".join)
def test_the_plain_versions_line_loads_neither_the_installer_nor_its_other_form(cli_home: Home,
                                                                                argv: list[str]) -> None:
    """Asked by hosts and scripts on every run: answered from what the runtime declares."""
    run = loaded("superfluid.cli", argv, cli_home.env, python=cli.script("python"))
    assert run.code == 0
    # what the answer does not need: installing, planning, fetching, another command
    assert run.under("superfluid.installer") == set()
    assert run.under("superfluid.commands") == {"superfluid.commands", "superfluid.commands.versions"}
    assert run.under("superfluid.manifest") == set() and "tempfile" not in run.modules
