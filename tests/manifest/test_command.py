"""``manifest/command``: ``superfluid-manifest``'s command line, in process: ``check``'s table and
exit code, the source and keys named by flags or the environment, usage errors (exit 2, pointing at
the subcommand's ``--help``), failures as JSON when ``--json`` was asked, and each page's examples and
exit codes. (Serving over HTTP is ``test_service.py``; the TUF subcommands ``test_tuf_command.py``.)"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.command import main
from superfluid.manifest.minisign import SecretKey
from tests import cli
from tests.manifest.release_folders import vary, write_release

GOOD = ["0.2.0", "0.1.0"]  # newest first
TAMPERED, UNSIGNED = "0.2.1", "0.1.1"

@dataclass(frozen=True)
class Folders:
    """Release folders: two good ones, one tampered after signing, one unsigned; and the key's file."""

    root: Path
    public: Path


@pytest.fixture(scope="module")
def checked_folders(tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], key: SecretKey) -> Folders:
    root = tmp_path_factory.mktemp("releases")
    write_release(root, "r0.1.0", vary(doc, "0.1.0"), key)
    write_release(root, "r0.2.0", vary(doc, "0.2.0", abi=2, line=None), key)
    tampered = write_release(root, "r0.2.1", vary(doc, "0.2.1", abi=2, line=None), key)
    sdist = tampered / "superfluid_toolchain-0.2.1.tar.gz.compat.json"
    sdist.write_bytes(sdist.read_bytes().replace(b'"abi": 2', b'"abi": 3', 1))
    write_release(root, "r0.1.1", vary(doc, "0.1.1"), None)
    public = tmp_path_factory.mktemp("keys") / "release.pub"
    public.write_text(key.public().to_text())
    return Folders(root, public)


@pytest.mark.usefixtures("no_manifest_variables")
def test_check_prints_the_table_and_exits_1_on_a_rejected_release(checked_folders: Folders, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--source", str(checked_folders.root), "--key", str(checked_folders.public)]) == 1
    out = capsys.readouterr().out
    rows = out.splitlines()
    assert rows[0].split() == ["VERSION", "NAME", "SIGNED", "BY", "BASERT", "LLAMACPP", "MLX"]
    assert [r.split()[0] for r in rows[1:3]] == GOOD
    assert f"rejected {TAMPERED} (r0.2.1): " in out and f"rejected {UNSIGNED} (r0.1.1): " in out
    good = tmp_path / "good"
    for name in ("r0.1.0", "r0.2.0"):
        shutil.copytree(checked_folders.root / name, good / name)
    monkeypatch.setenv("SUPERFLUID_MANIFEST_SOURCE", str(good))
    monkeypatch.setenv("SUPERFLUID_MANIFEST_KEYS", str(checked_folders.public))
    assert main(["check", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in answer["releases"]] == GOOD and answer["signatures_required"] is True


@pytest.mark.usefixtures("no_manifest_variables")
def test_check_of_an_empty_source_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--source", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["VERSION", "NAME", "SIGNED", "BY", "BASERT", "LLAMACPP", "MLX"]
    assert "no release found in the source" in out and "no trusted keys: signatures were not checked" in out


@pytest.mark.usefixtures("no_manifest_variables")
def test_export_writes_every_answer(checked_folders: Folders, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    assert main(["export", "--source", str(checked_folders.root), "--key", str(checked_folders.public),
                 str(site)]) == 0
    written = sorted(p for p in site.rglob("*") if p.is_file())
    assert capsys.readouterr().out == f"{len(written)} files written to {site} (2 releases, 2 rejected)\n"
    releases = site / "v1" / "releases"
    assert (releases / "0.2.0.json").is_file() and not (releases / "0.2.1.json").exists()


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["serve"], 2, "--source is missing"),
    (["serve", "--source", "/nonexistent/releases"], 2, "--source /nonexistent/releases: no such file or directory"),
    (["serve", "--source", "ftp://host/x"], 2, "give a directory, an http(s):// mirror URL or github:OWNER/REPO"),
    (["serve", "--source", "github:not a repo"], 2, "not a GitHub repository"),
    (["check", "--source", ".", "--key", "/nonexistent.pub"], 2, "--key /nonexistent.pub: no such file"),
    (["serve", "--source", ".", "--port", "many"], 2,
     "argument --port: expected an integer from 0 to 65535, not 'many'"),
    (["check", "--source", ""], 2, "argument --source: needs SRC, not an empty string"),
    (["check", "--source", ".", "--unknown"], 2, "unrecognized arguments: --unknown (see 'superfluid-manifest check "
                                                  "--help')"),
    (["keys", "init", "x", "--bogus"], 2, "unrecognized arguments: --bogus (see 'superfluid-manifest keys init "
                                          "--help')"),
    ([], 2, "the following arguments are required: <command> (see 'superfluid-manifest --help')"),
    (["keys"], 2, "the following arguments are required: <command> (see 'superfluid-manifest keys --help')"),
], ids=["no-source", "no-such-directory", "another-scheme", "bad-repository", "no-key-file", "bad-port",
        "empty-source", "unknown-flag", "unknown-flag-of-a-nested-command", "no-command", "keys-without-a-command"])
@pytest.mark.usefixtures("no_manifest_variables")
def test_usage_errors_exit_2(args: list[str], code: int, fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == code
    out, err = capsys.readouterr()
    assert fragment in err and "Traceback" not in err and out == "", err


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--port", "99999", "argument --port: expected an integer from 0 to 65535, not '99999'"),
    ("--port", "-1", "argument --port: expected an integer from 0 to 65535, not '-1'"),
    ("--ttl", "-5", "argument --ttl: expected a number of seconds from 0 to 31536000 (a year), not '-5'"),
    ("--ttl", "nan", "argument --ttl: expected a number of seconds from 0 to 31536000 (a year), not 'nan'"),
    ("--ttl", "inf", "argument --ttl: expected a number of seconds from 0 to 31536000 (a year), not 'inf'"),
    ("--max-age", "-1", "argument --max-age: expected an integer from 0 to 31536000, not '-1'"),
    ("--max-age", "1.5", "argument --max-age: expected an integer from 0 to 31536000, not '1.5'"),
], ids=["port-huge", "port-negative", "ttl-negative", "ttl-nan", "ttl-inf", "max-age-negative", "max-age-fraction"])
def test_a_bad_limit_is_a_usage_error_naming_the_flag(flag: str, value: str, said: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35, items 1 and 2: was an OverflowError from bind() or a ValueError traceback (exit 1), and
    ``--ttl nan``/``inf`` were served with."""
    assert main(["serve", "--source", str(tmp_path), flag, value]) == 2
    out, err = capsys.readouterr()
    assert err == f"superfluid-manifest: {said} (see 'superfluid-manifest serve --help')\n" and out == ""


@pytest.mark.parametrize(("argv", "said"), [
    (["export", "--source", ".", "--tuf-keys", "K", "--expires", "timestamp=99999999w", "out"],
     "argument --expires: 'timestamp=99999999w': a duration of at most 36500d (100 years) is allowed"),
    (["export", "--source", ".", "--expires", "timestamp=0s", "out"],
     "argument --expires: 'timestamp=0s': a duration of zero is not allowed"),
    (["keys", "init", "k", "--root-keys", "999999999"], "argument --root-keys: expected an integer from 1 to 64"),
], ids=["expires-huge", "expires-zero", "root-keys-huge"])
def test_a_bad_duration_or_count_is_a_usage_error_naming_the_flag(argv: list[str], said: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35, items 3 and 15: a huge ``--expires`` was an OverflowError traceback, zero was "not a whole
    number and a unit"; a huge ``--root-keys`` made keys for ever."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"superfluid-manifest: {said}") and "Traceback" not in err and out == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_manifest_variables")
def test_a_failure_asked_with_json_is_json_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--json"]) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert (error["code"], error["exit"]) == ("usage", 2) and error["message"].startswith("--source is missing")
    assert err == f"superfluid-manifest: {error['message']}\n"


@pytest.mark.parametrize(("page", "example", "exit_line"), [
    (["serve"], "superfluid-manifest serve --source ./releases --key release.pub", "2  a usage error"),
    (["export"], "--tuf-keys /secure/tuf-keys ./site", "1  the source cannot be read"),
    (["check"], "superfluid-manifest check --source github:OWNER/REPO --json", "0  done"),
    (["keys", "init"], "keys init /secure/tuf-keys-2 --root-keys 3 --root-threshold 2",
     "2  a usage error, or DIR holds a key set already"),
    (["refresh-timestamp"], "refresh-timestamp --tuf-keys /etc/superfluid/tuf-timestamp ./site",
     "1  the export's metadata does not read"),
    (["rotate-root"], "rotate-root --tuf-keys /secure/tuf-keys --to /secure/tuf-keys-2 ./site",
     "2  a usage error, or a key set the root does not trust"),
    ([], "superfluid-manifest serve --source ./releases --key release.pub", "2  a usage error"),
    (["keys"], "superfluid-manifest keys init /secure/tuf-keys", "2  a usage error (no command: keys init DIR)"),
], ids=["serve", "export", "check", "keys-init", "refresh-timestamp", "rotate-root", "top", "keys"])
def test_each_page_ends_with_examples_and_exit_codes(page: list[str], example: str, exit_line: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*page, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.index("examples:") < out.index(example) < out.index("exit codes:") < out.index(exit_line)


def test_usage_error_through_the_console_script(tmp_path: Path) -> None:
    done = cli.run("superfluid-manifest", "serve", timeout=60, cwd=tmp_path)  # no manifest variable
    assert done.code == 2 and done.stderr.startswith("superfluid-manifest: --source is missing"), done.stderr
