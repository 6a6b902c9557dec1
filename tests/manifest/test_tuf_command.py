"""``manifest/tuf_command``: ``superfluid-manifest``'s TUF subcommands and flags, in process:
``keys init`` says what it made, ``refresh-timestamp`` and ``rotate-root`` the version they signed;
``export --tuf-keys`` signs, ``serve --tuf-repo`` keeps; every usage error is exit 2 before anything
is written. (The whole cycle against the real client is ``test_tuf_export.py``.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from superfluid.manifest.command import main
from superfluid.manifest.command_line import ManifestParser
from superfluid.manifest.tuf_command import COMMANDS, add_commands, add_flags, signer_for_export
from superfluid.manifest.tuf_keys import init_keys
from superfluid.manifest.tuf_repository import METADATA, latest_root
from superfluid.runtime.kernel.errors import UsageError


@pytest.fixture
def empty_source(tmp_path: Path) -> Path:
    """A release source with no release in it (the TUF steps sign whatever the export holds)."""
    where = tmp_path / "releases"
    where.mkdir()
    return where


@pytest.mark.parametrize(("argv", "fragment"), [
    (["keys", "init", "{keys}"], "already holds a key set"),
    (["keys", "init", "{tmp}/k2", "--root-keys", "2", "--root-threshold", "3"], "threshold must be between 1"),
    (["export", "--source", "{source}", "--tuf-keys", "{keys}", "--expires", "timestamp=2", "{tmp}/s"],
     "argument --expires: 'timestamp=2': give ROLE=DURATION"),
    (["export", "--source", "{source}", "--tuf-keys", "{tmp}", "{tmp}/s"], "holds no keys.json"),
    (["refresh-timestamp", "--tuf-keys", "{keys}", "{tmp}"], "holds no TUF metadata"),
    (["refresh-timestamp", "--tuf-keys", "{keys}", "{tmp}/none"], "{tmp}/none: no such file or directory"),
    (["refresh-timestamp", "{tmp}"], "the following arguments are required: --tuf-keys"),
    (["rotate-root", "--tuf-keys", "{keys}", "--expires", "root=1y", "{tmp}"], "argument --expires: 'root=1y'"),
    (["serve", "--source", "{source}", "--tuf-keys", "{keys}"], "--tuf-keys needs --tuf-repo DIR"),
    (["serve", "--source", "{source}", "--tuf-repo", "{tmp}/repo"], "holds no metadata/timestamp.json"),
], ids=["keys-twice", "threshold", "expires", "no-key-set", "no-metadata", "not-a-directory", "no-key-set-named",
        "expires-of-rotate-root", "keys-without-repo", "repo-unsigned"])
def test_usage_errors_are_exit_2_before_anything_is_written(empty_source: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str], argv: list[str],
                                                            fragment: str) -> None:
    keys = tmp_path / "keys"
    init_keys(keys)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = [a.format(keys=keys, tmp=tmp_path, source=empty_source) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert fragment.format(tmp=tmp_path) in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_keys_init_says_what_it_made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "keys"
    assert main(["keys", "init", str(where), "--root-keys", "3", "--root-threshold", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in lines[:4]] == [
        "root: 3 keys, threshold 2", "targets: 1 key, threshold 1", "snapshot: 1 key, threshold 1",
        "timestamp: 1 key, threshold 1"]
    assert re.fullmatch(r"root: .* \([0-9a-f]{16}, [0-9a-f]{16}, [0-9a-f]{16}\)", lines[0])
    assert lines[4] == f"keys written to {where}: keep the root-*.pem files offline once the first export is signed"
    assert (where / "keys.json").is_file() and len(list(where.glob("root-*.pem"))) == 3


def test_export_refresh_and_rotate(empty_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys, new, site = tmp_path / "keys", tmp_path / "new", tmp_path / "site"
    assert main(["keys", "init", str(keys)]) == 0
    assert main(["export", "--source", str(empty_source), "--tuf-keys", str(keys), str(site)]) == 0
    assert latest_root(site / METADATA) is not None
    capsys.readouterr()
    assert main(["refresh-timestamp", "--tuf-keys", str(keys), "--expires", "timestamp=2h", str(site)]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(rf"timestamp version 2 signed in {re.escape(str(site / METADATA))}, valid until "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n", out), out
    assert main(["rotate-root", "--tuf-keys", str(keys), str(site)]) == 0
    assert capsys.readouterr().out == f"root version 2 signed in {site / METADATA}; the index re-signed with {keys}\n"
    assert main(["keys", "init", str(new)]) == 0
    capsys.readouterr()
    assert main(["rotate-root", "--tuf-keys", str(keys), "--to", str(new), str(site)]) == 0
    assert capsys.readouterr().out == f"root version 3 signed in {site / METADATA}; the index re-signed with {new}\n"
    found = latest_root(site / METADATA)
    assert found is not None and found[0] == 3


def _args(*argv: str) -> argparse.Namespace:
    p = ManifestParser(prog="superfluid-manifest export")
    add_flags(p)
    p.add_argument("out")
    return p.parse_args([*argv, "site"])


def test_export_signs_only_with_tuf_keys(tmp_path: Path) -> None:
    assert signer_for_export(_args()) is None
    with pytest.raises(UsageError, match="argument --expires: 'timestamp=2'"):  # refused as the line is read
        _args("--expires", "timestamp=2")
    init_keys(tmp_path / "keys")
    assert callable(signer_for_export(_args("--tuf-keys", str(tmp_path / "keys"))))


@pytest.mark.parametrize(("serve", "flags"), [
    (True, {"--tuf-repo", "--tuf-keys", "--expires"}),
    (False, {"--tuf-keys", "--expires"}),
], ids=["serve", "export"])
def test_the_flags_each_command_takes(serve: bool, flags: set[str]) -> None:
    p = argparse.ArgumentParser()
    add_flags(p, serve=serve)
    assert {s for a in p._actions for s in a.option_strings if s.startswith("--") and s != "--help"} == flags


def test_the_commands_it_runs_are_the_ones_it_adds() -> None:
    top = ManifestParser(prog="superfluid-manifest")
    sub = top.add_subparsers(dest="command", parser_class=ManifestParser)
    add_commands(sub)
    assert tuple(sub.choices) == COMMANDS
