"""What ``compat --service`` suggests when a static export (a folder) lists no answer for the value
asked (issue 42, item 22): only what can answer. A folder holds no other answer, checked or not, so
the unchecked ask (``--insecure-no-freshness``, "HTTP 404" of a folder) is never suggested."""

from __future__ import annotations

from pathlib import Path

from tests import cli
from tests.end_to_end.test_for_export import export  # noqa: F401 - the fixture: a real export with TUF metadata


def test_a_value_the_export_does_not_hold_suggests_no_unchecked_ask(export: tuple[Path, Path],  # noqa: F811
                                                                     tmp_path: Path) -> None:
    site, _ = export
    env = cli.environment(tmp_path / "home")
    question = ("compat", "--service", str(site), "--runtime", "basert", "--abi", "7")
    run = cli.run("superfluid", *question, "--trust-root", str(site / "metadata" / "1.root.json"), env=env)
    assert run.code == 1 and "lists no signed answer" in run.stderr, run.stderr
    assert "--insecure-no-freshness" not in run.stderr and run.fixes == ()
    assert "a static export holds no other answer" in run.stderr
    unchecked = cli.run("superfluid", *question, "--insecure-no-freshness", env=env)  # what it would have said
    assert unchecked.code == 1 and "HTTP 404" in unchecked.stderr
