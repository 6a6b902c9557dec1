"""Filesystem faults say which path is wrong and why (issue 25, item 8), through the real CLI: a
SUPERFLUID_HOME that is a file holds nothing (no runtime is "broken" there, no fix that cannot
work), ``mirror sync`` into a file, and an ``--from`` archive this user cannot read or that is a
FIFO. None of them blames the home's free space, and none changes a byte."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import cli
from tests.faults.conftest import Home

BLAME = "check SUPERFLUID_HOME"


@pytest.mark.parametrize("under", [False, True], ids=["a-file", "under-a-file"])
def test_runtimes_in_a_home_that_is_a_file_says_nothing_is_installed_there(tmp_path: Path, mirror_dir: Path,
                                                                           under: bool) -> None:
    afile = tmp_path / "home-file"
    afile.write_text("not a directory\n")
    home = Home(afile / "sub" if under else afile, cli.environment(afile / "sub" if under else afile), mirror_dir)
    rows = home.sf("runtimes", "--json")
    assert rows.code == 0, rows.stderr
    for r in rows.json():
        assert r["state"] == "not installed", r
        assert f"SUPERFLUID_HOME ({home.path})" in r["ready"] and "not a directory" in r["ready"], r
        assert "runtime use" not in r["ready"] and "point SUPERFLUID_HOME at a directory" in r["ready"], r
    text = home.sf("runtimes")
    assert text.code == 0 and "broken" not in text.stdout and "--auto" not in text.stdout, text.stdout
    assert "installed runtimes: none (SUPERFLUID_HOME" in text.stdout
    assert afile.read_text() == "not a directory\n"


@pytest.fixture
def lock_file(installed_home: Home, tmp_path: Path) -> Path:
    lock = tmp_path / "superfluid.lock"
    run = installed_home.sf("lock", "--runtime", "basert", "--platform", "linux-x64", "--backend", "cpu",
                            "--mirror", str(installed_home.mirror), "-o", str(lock))
    assert run.code == 0, run.stderr
    return lock


@pytest.mark.parametrize("under", [False, True], ids=["a-file", "under-a-file"])
def test_mirror_sync_into_a_file_names_it(installed_home: Home, lock_file: Path, tmp_path: Path,
                                          under: bool) -> None:
    target = tmp_path / "not-a-dir"
    target.write_text("keep me\n")
    named = target / "mirror" if under else target
    run = installed_home.sf("mirror", "sync", str(named), "--lock", str(lock_file))
    assert run.code == 2, run.stderr
    expect = f"{named} cannot be made: {target} is a regular file" if under else f"{target} is a regular file"
    assert expect in run.stderr and "not a directory" in run.stderr and BLAME not in run.stderr, run.stderr
    assert target.read_text() == "keep me\n"


@pytest.fixture
def unreadable_archive(mirror_dir: Path) -> Iterator[tuple[Path, list[str]]]:
    """A copy of a release archive this user cannot read (as root: run as nobody), and the prefix that
    runs the CLI as that user."""
    base = Path(tempfile.mkdtemp(prefix="sf-unreadable-"))
    try:
        os.chmod(base, 0o755)
        archive = base / "engine.tar.gz"
        shutil.copy(next(mirror_dir.rglob("basert-engine-linux-x64-0.4.0.tar.gz")), archive)
        os.chmod(archive, 0)
        prefix: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: no unprivileged user to run as")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        yield archive, prefix
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_an_unreadable_from_archive_is_named(unreadable_archive: tuple[Path, list[str]], tmp_path: Path) -> None:
    archive, prefix = unreadable_archive
    home = Path(tempfile.mkdtemp(prefix="sf-home-"))
    try:
        os.chmod(home, 0o777)
        done = cli.run("superfluid", "runtime", "install", "basert", "--from", archive, "--untested",
                       env=cli.environment(home), timeout=20, prefix=prefix)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.code == 2, done.stderr
    assert f"--from {archive} cannot be read (permission denied)" in done.stderr, done.stderr
    assert BLAME not in done.stderr and "Traceback" not in done.stderr


def test_a_fifo_as_from_is_named_as_a_fifo(installed_home: Home, tmp_path: Path) -> None:
    fifo = tmp_path / "engine.tar.gz"
    os.mkfifo(fifo)
    run = installed_home.sf("runtime", "install", "basert", "--from", str(fifo))
    assert run.code == 2 and f"--from {fifo} is a FIFO, not a regular file" in run.stderr, run.stderr
