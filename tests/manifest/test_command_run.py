"""``manifest/command_run``: every path a ``superfluid-manifest`` line gives is checked before anything
is read or written, and a path the environment gives is named as its variable (the flags' paths are
swept in tests/face/test_path_sweep.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.manifest.command import main


@pytest.mark.parametrize(("variable", "argv", "says"), [
    ("SUPERFLUID_MANIFEST_SOURCE", ["check"], "SUPERFLUID_MANIFEST_SOURCE {fifo} is a FIFO, not a directory of release "
                                              "folders"),
    ("SUPERFLUID_MANIFEST_KEYS", ["check", "--source", "{tmp}"], "SUPERFLUID_MANIFEST_KEYS {fifo} is a FIFO, not a "
                                                                  "public key"),
    ("SUPERFLUID_MANIFEST_TUF_KEYS", ["serve", "--source", "{tmp}", "--tuf-repo", "{tmp}/repo"],
     "SUPERFLUID_MANIFEST_TUF_KEYS {fifo} is a FIFO, not a key set directory"),
    ("SUPERFLUID_MANIFEST_TUF_REPO", ["serve", "--source", "{tmp}"],
     "SUPERFLUID_MANIFEST_TUF_REPO {fifo} is a FIFO, not a TUF repository directory"),
])
@pytest.mark.usefixtures("no_manifest_variables")
def test_a_path_the_environment_gives_is_named_as_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str], variable: str,
                                                               argv: list[str], says: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv(variable, str(fifo))
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert says.format(fifo=fifo) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]  # nothing written


@pytest.mark.usefixtures("no_manifest_variables")
def test_every_path_is_checked_before_the_source_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A faulty ``--key`` is named even when the source is a URL nothing answers: no request is made first."""
    (tmp_path / "keydir").mkdir()
    assert main(["check", "--source", "http://127.0.0.1:9/o/r/", "--key", str(tmp_path / "keydir")]) == 2
    assert f"--key {tmp_path / 'keydir'} is a directory, not a public key" in capsys.readouterr().err
