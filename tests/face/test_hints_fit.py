"""Hints that fit where they are given (issue 35, items 8-13), through the real CLI: each hint is read
in the situation that prints it, and the command it suggests, pasted as it reads (its placeholders
filled), does what the hint says; no hint names a flag its command does not take."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import cli
from tests.conftest import Home
from tests.faults.conftest import mirror_dir  # noqa: F401 - the fixture, defined once there

ELSEWHERE = "install from elsewhere with --mirror URL|DIR"


@pytest.fixture
def fresh(tmp_path: Path) -> Home:
    path = tmp_path / "home"
    path.mkdir()
    return Home(path, cli.environment(path))


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but never listening: a connection there is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _pasted(text: str) -> list[str]:
    """The words after ``superfluid`` of every `superfluid ...` command ``text`` suggests."""
    return [shlex.split(m)[1:] for m in re.findall(r"`(superfluid [^`]+)`", text)]


def _lock(home: Home, mirror: Path, where: Path) -> Path:
    lock = where / "superfluid.lock"
    done = home.superfluid("lock", "--runtime", "basert", "--mirror", str(mirror), "-o", str(lock))
    assert done.code == 0, done.stderr
    return lock


# -- item 8: a network fault's "or --mirror ... or --offline" only where the command takes them ---------


def test_a_registry_that_is_down_suggests_no_flag_push_does_not_take(fresh: Home, mirror_dir: Path,  # noqa: F811
                                                                     tmp_path: Path, closed_port: int) -> None:
    lock = _lock(fresh, mirror_dir, tmp_path)
    done = fresh.superfluid("mirror", "push", f"oci://127.0.0.1:{closed_port}/fleet/engines", "--lock", str(lock),
                            "--plain-http", "--json")
    assert done.code == 1 and "Traceback" not in done.stderr, done.stderr
    error = done.json()["error"]
    assert error["code"] == "connection-refused"
    assert error["advice"] == (f"check that the server at 127.0.0.1:{closed_port} is running and that the URL "
                               "names its port") and "fix" not in error
    assert "--mirror" not in done.stderr and "--offline" not in done.stderr


def test_a_service_that_is_down_suggests_no_flag_compat_does_not_take(fresh: Home, closed_port: int) -> None:
    done = fresh.superfluid("compat", "--service", f"http://127.0.0.1:{closed_port}/", "--runtime", "basert",
                            "--abi", "1", "--insecure-no-freshness", "--json")
    assert done.code == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.json()["error"]["advice"].startswith(f"check that the server at 127.0.0.1:{closed_port} is running")
    assert "--mirror" not in done.stderr and "--offline" not in done.stderr


def test_an_install_from_a_mirror_that_is_down_still_names_other_sources(fresh: Home, closed_port: int) -> None:
    done = fresh.superfluid("runtime", "install", "basert", "--mirror", f"http://127.0.0.1:{closed_port}/m")
    assert done.code == 1 and ELSEWHERE in done.stderr, done.stderr  # install takes both: the hint fits


# -- items 9 and 10: lock's refusals said of the machine asked, with what lock takes ---------------------


def test_lock_for_another_platform_speaks_of_the_machine_asked(fresh: Home, mirror_dir: Path,  # noqa: F811
                                                               tmp_path: Path) -> None:
    done = fresh.superfluid("lock", "--platform", "linux-arm64", "--runtime", "basert", "--mirror", str(mirror_dir),
                            "-o", str(tmp_path / "a.lock"))
    assert done.code == 1 and not (tmp_path / "a.lock").exists(), done.stderr
    said = ("basert linux-arm64 (cpu): not locked: baseRT publishes no bundle for linux-arm64 (the machine asked is "
            "Linux arm64; bundles exist for linux-x64): use a mirror that carries one (--mirror URL|DIR)\n")
    assert said in done.stderr
    assert "this is Linux arm64" not in done.stderr and "--from" not in done.stderr and "--sha256" not in done.stderr


def test_lock_of_a_runtime_the_mirror_has_no_listing_of_names_the_listing(fresh: Home, mirror_dir: Path,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    done = fresh.superfluid("lock", "--runtime", "llamacpp", "--mirror", str(mirror_dir), "-o",
                            str(tmp_path / "b.lock"), "--json")
    assert done.code == 1, done.stderr
    error = done.json()["error"]
    assert error["message"].startswith("nothing of llamacpp installs on any machine asked: nothing was written")
    assert "other platforms" not in error["advice"] and "fix" not in error
    assert error["advice"] == ("add the listing file to the mirror (see docs/install.md); or name a mirror that holds "
                            "ggml-org/llama.cpp's listing with --mirror URL|DIR")


# -- item 11: a tampered mirror directory: mirror verify finds it, mirror sync puts it back --------------


def test_a_tampered_mirror_names_mirror_verify_and_sync_which_fix_it(fresh: Home, mirror_dir: Path,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    lock = _lock(fresh, mirror_dir, tmp_path)
    bad = tmp_path / "engines-bad"
    assert fresh.superfluid("mirror", "sync", str(bad), "--lock", str(lock)).code == 0
    (tarball,) = bad.rglob("basert-engine-linux-x64-0.4.0.tar.gz")
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 1
    tarball.write_bytes(bytes(data))
    done = fresh.superfluid("runtime", "install", "--locked", str(lock), "--mirror", str(bad))
    assert done.code == 1 and fresh.installs() == [], done.stderr
    assert "lock --check" not in done.stderr  # it asks the release, not the mirror: "up to date"
    verify, sync = _pasted(done.stderr)
    assert verify[:2] == ["mirror", "verify"] and sync[:2] == ["mirror", "sync"]
    found = fresh.superfluid(*verify)
    assert found.code == 1 and "basert-engine-linux-x64-0.4.0.tar.gz: has SHA-256" in found.stdout, found.stdout
    assert fresh.superfluid(*sync).code == 0
    again = fresh.superfluid("runtime", "install", "--locked", str(lock), "--mirror", str(bad))
    assert again.code == 0 and fresh.installs() == ["0.4.0-cpu"], again.stderr


# -- item 12: no trust root: --trust-root FILE is in the fix ---------------------------------------------


def test_no_trust_root_names_trust_root_in_the_fix(fresh: Home, closed_port: int) -> None:
    done = fresh.superfluid("compat", "--service", f"http://127.0.0.1:{closed_port}/", "--runtime", "basert",
                            "--abi", "1", "--json")
    assert done.code == 2, done.stderr
    advice = done.json()["error"]["advice"]
    assert "give --trust-root FILE" in advice and "--insecure-no-freshness" in advice


# -- item 13 (and issue 42, item 4): a repair whose mirror moved: repair --mirror, never an install --from ----


def test_a_repair_whose_mirror_moved_names_repair_mirror_and_no_other_install(fresh: Home, mirror_dir: Path,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    old, new = tmp_path / "mirror-a", tmp_path / "mirror-b"
    shutil.copytree(mirror_dir, old)
    for version in ("0.3.1", "0.4.0"):
        assert fresh.superfluid("runtime", "install", "basert", "--version", version, "--mirror", str(old)).code == 0
    old.rename(new)
    shutil.rmtree(fresh.path / "cache")  # what an install keeps there (issue 42, item 30) is gone too
    lib = fresh.basert / "0.3.1-cpu" / "lib" / "libbaseRT.so"
    lib.unlink()
    done = fresh.superfluid("runtime", "repair", "basert", "0.3.1-cpu")
    assert done.code == 1, done.stderr
    assert done.stderr.rstrip().endswith(
        "nothing was changed; a repair with --mirror naming the folder the mirror moved to (or a mirror that holds "
        "the release) puts it back from there, checked against the receipt's digest")
    assert "--from" not in done.stderr and "install" not in " ".join(" ".join(f.argv) for f in done.fixes)
    fixed = fresh.superfluid("runtime", "repair", "basert", "0.3.1-cpu", "--mirror", str(new))
    assert fixed.code == 0 and lib.is_file(), fixed.stderr
    assert fresh.superfluid("runtime", "verify", "basert", "0.3.1-cpu").code == 0
    assert fresh.installs() == ["0.3.1-cpu", "0.4.0-cpu"] and fresh.current() == "0.4.0-cpu"  # the default as it was
