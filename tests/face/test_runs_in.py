"""The dispatch's second step (``parser.runner``): a flag that makes a line another command's form
hands it to that form's module (``runtime install --locked``, ``--for``, ``SUPERFLUID_FOR``)."""

from __future__ import annotations

import argparse

import pytest

from superfluid.cli import _path
from superfluid.commands import install, install_for, install_locked, runtimes
from superfluid.parser import load, parser, runner


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
])
def test_the_form_of_a_line_runs_in_its_module(line: list[str], environ: dict[str, str], module: object) -> None:
    args = _args(*line)
    assert runner(load(_path(args)), args, environ) is module
