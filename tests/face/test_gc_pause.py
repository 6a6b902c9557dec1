"""A command runs without the cyclic garbage collector (issue 13): its imports make tens of thousands
of objects that each full collection would walk again. ``serve`` too, until its startup line is out
(``supervise.serve_child`` starts it again: a server lives long; issue 45's cold start), and a caller of
``main`` in process gets it back as it was."""

from __future__ import annotations

import argparse
import gc

import pytest

from superfluid import cli


@pytest.mark.parametrize(("argv", "module", "entry", "collecting"), [
    (["runtimes", "--json"], "superfluid.commands.runtimes", "run", False),
    (["compat", "--json"], "superfluid.commands.compat", "run", False),
    (["serve", "--model", "x"], "superfluid.commands.serve", "run", False),
], ids=["runtimes", "compat", "serve"])
def test_the_collector_is_paused_for_a_command_and_given_back(
        argv: list[str], module: str, entry: str, collecting: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def record(_args: argparse.Namespace | list[str]) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(f"{module}.{entry}", record)
    assert gc.isenabled()
    assert cli.main(argv) == 0
    assert seen == [collecting]
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        assert cli.main(["--version"]) == 0
        assert not gc.isenabled()
    finally:
        gc.enable()
