"""What ``runtime repair`` finds and says, through the real CLI (issue 42): an install from a mirror folder
is repaired from the cache after the folder moved (item 30); a repair says "removed" for a file it
removed, "put back" for one it put back (item 33); ``--offline`` with the archive gone from the cache
names the repair online, which fills the cache (pasted)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from tests import cli
from tests.conftest import Home
from tests.end_to_end import releases
from tests.release_server import ReleaseServer

LIB = "lib/libbaseRT.so"


def _blob(home: Home, install: str) -> Path:
    sha = home.receipt(install)["sources"][0]["sha256"]
    return home.path / "cache" / "sha256" / sha


def test_an_install_from_a_mirror_folder_is_kept_in_the_cache_and_repaired_after_it_moved(
        cli_home: Home, mirror: Path, tmp_path: Path) -> None:
    folder = tmp_path / "engines"
    shutil.copytree(mirror, folder)
    cli_home.env["SUPERFLUID_GITHUB_API"] = "http://127.0.0.1:9"  # nothing listens: only the cache can serve
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", str(folder)).code == 0
    blob = _blob(cli_home, "0.4.0-cpu")
    (archive,) = folder.rglob(releases.bundle_name("0.4.0"))
    assert blob.read_bytes() == archive.read_bytes()
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    du = cli_home.superfluid("cache", "du", "--json")
    assert du.code == 0 and du.json()["kinds"]["in_use"]["files"] == 1, du.stdout
    folder.rename(tmp_path / "moved")
    (cli_home.basert / "0.4.0-cpu" / LIB).unlink()
    run = cli_home.superfluid("runtime", "repair", "basert")
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("superfluid: basert 0.4.0-cpu repaired: put back lib/libbaseRT.so as its receipt "
                                 "records it")
    assert cli_home.superfluid("runtime", "verify", "basert").code == 0


def test_a_repair_says_removed_for_a_file_it_removed(cli_home: Home, mirror: Path) -> None:
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror)).code == 0
    lib = cli_home.basert / "0.4.0-cpu" / "lib"
    (lib / "LICENSE").unlink()
    (lib / "stray.txt").write_text("not the engine's")
    run = cli_home.superfluid("runtime", "repair", "basert")
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("superfluid: basert 0.4.0-cpu repaired: put back lib/LICENSE as its receipt records "
                                 "it; removed lib/stray.txt, which it does not record (0.4.0, ABI 1")
    assert (lib / "LICENSE").is_file() and not (lib / "stray.txt").exists()
    (lib / "stray.txt").write_text("again")
    doc = cli_home.superfluid("runtime", "repair", "basert", "--json").json()
    assert (doc["put_back"], doc["removed"]) == ([], ["lib/stray.txt"])
    run = cli_home.superfluid("runtime", "repair", "basert")  # nothing differs now
    assert run.code == 0 and "nothing to repair" in run.stdout


def test_offline_with_the_archive_gone_from_the_cache_names_the_repair_online(cli_home: Home,
                                                                             server: ReleaseServer) -> None:
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url).code == 0
    _blob(cli_home, "0.4.0-cpu").unlink()
    (cli_home.basert / "0.4.0-cpu" / LIB).unlink()
    run = cli_home.superfluid("runtime", "repair", "basert", "--offline")
    assert run.code == 1 and "offline: the cache holds no archive basert-engine-linux-x64-0.4.0.tar.gz" in run.stderr
    fix = run.fix("repair")
    assert fix.argv == ("superfluid", "runtime", "repair", "basert", "0.4.0-cpu")  # online: it fills the cache
    assert fix.does == "fills the cache and puts it back"
    done = cli.paste(fix, run, env=cli_home.env)
    assert done.code == 0 and (cli_home.basert / "0.4.0-cpu" / LIB).is_file(), done.stderr
    assert _blob(cli_home, "0.4.0-cpu").is_file()
    again = cli_home.superfluid("runtime", "repair", "basert", "--offline")
    assert again.code == 0 and "nothing to repair" in again.stdout
