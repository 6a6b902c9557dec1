"""``cache du`` and ``cache dir`` of a home that cannot hold a cache, and ``--keep-lock`` paths of every
kind, through the real CLI (issue 42, items 29, 24 and 20): named for what they are, never "0 B" for
a home that is a file, "no such file" for a path that exists, or a lock written over a text file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import cli
from tests.conftest import Home


@pytest.mark.parametrize("command", [("cache", "du"), ("cache", "du", "--json"), ("cache", "dir")])
def test_a_home_that_is_a_file_is_named_not_counted(tmp_path: Path, command: tuple[str, ...]) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory\n")
    run = cli.run("superfluid", *command, env=cli.environment(home))
    assert run.code == 1, run.stdout
    assert run.stderr == (f"superfluid: SUPERFLUID_HOME ({home}) is a file, not a directory: it holds no download "
                          "cache: point SUPERFLUID_HOME at a directory (or unset it for ~/.superfluid)\n")
    if "--json" in command:
        assert run.json()["error"]["code"] == "home-unusable"
    else:
        assert run.stdout == ""
    assert home.read_text() == "not a directory\n"


def test_a_home_under_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    run = cli.run("superfluid", "cache", "du", env=cli.environment(tmp_path / "file" / "home"))
    assert run.code == 1 and f"{tmp_path / 'file'} is a file, not a directory: it holds no download cache" in run.stderr


def test_a_home_not_made_yet_is_an_empty_cache(tmp_path: Path) -> None:
    run = cli.run("superfluid", "cache", "du", "--json", env=cli.environment(tmp_path / "new"))
    assert run.code == 0 and run.json()["total"] == {"bytes": 0, "files": 0}, run.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("command", ["du", "prune"])
def test_keep_lock_paths_are_named_for_what_they_are(cli_home: Home, tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = {str(tmp_path): "is a directory, not a lock file", str(fifo): "is a FIFO, not a lock file",
             str(tmp_path / "missing.lock"): ": no such file or directory"}
    for path, what in cases.items():
        run = cli_home.superfluid("cache", command, "--keep-lock", path)
        assert run.code == 2 and f"--keep-lock {path}{'' if what[0] == ':' else ' '}{what}" in run.stderr, run.stderr


def test_a_keep_lock_that_is_a_text_file_is_no_lock_and_is_not_offered_a_rewrite(cli_home: Home,
                                                                                  tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    run = cli_home.superfluid("cache", "du", "--keep-lock", str(notes), "--json")
    assert run.code == 1
    error = run.json()["error"]
    assert error["message"].startswith(f"{notes}: is not a lock file superfluid reads: it is not valid TOML")
    assert error["advice"] == "--keep-lock names a lock that superfluid lock wrote"
    assert "fix" not in error and "remove" not in run.stderr and "--upgrade" not in run.stderr
    assert notes.read_text() == "my notes\n"
