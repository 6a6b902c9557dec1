"""The hints of ``lock``, ``runtime install --locked`` and ``mirror sync|verify`` (issue 42): each a
command the suite pastes in the situation that printed it, keeping the lock path and the mirror the
user named; a lock or mirror path that is not what its flag asks is exit 2 naming it (items 19, 20,
21, 26, 27 and 33), through the real CLI against the loopback release server."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from superfluid.installer.fleet import lockfile
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.fleet.conftest import BASERT, Machine, machine_at
from tests.release_server import ReleaseServer

LOCK_ARGS = ("lock", "--runtime", "basert", "--platform", "linux-x64", "--backend", "cpu")
#: a GitHub API nothing answers: a command that goes there fails
NOWHERE = "http://127.0.0.1:9"


def _lock(admin: Machine, *extra: str, name: str = "superfluid.lock") -> Path:
    run = admin.superfluid(*LOCK_ARGS, *extra, *(("-o", name) if name != "superfluid.lock" else ()))
    assert run.code == 0, run.stderr
    return admin.cwd / name


# --- item 19: lock --check reads the mirror the lock names; offline, its fix checks (never rewrites) ----------


def test_check_of_a_lock_from_a_mirror_reads_that_mirror(admin: Machine, fleet_server: ReleaseServer,
                                                         tmp_path: Path) -> None:
    mirror = fleet_server.write_mirror(tmp_path / "upstream")
    path = _lock(admin, "--mirror", str(mirror))
    before = path.read_bytes()
    admin.env["SUPERFLUID_GITHUB_API"] = NOWHERE  # the network is not asked: the mirror is
    run = admin.superfluid("lock", "--check")
    assert run.code == 0, run.stderr
    assert "up to date (1 engine" in run.stdout and f"reading releases from the mirror {mirror}" in run.stderr
    assert admin.superfluid("lock").code == 0 and path.read_bytes() == before  # a plain lock too
    shutil.rmtree(mirror)  # gone: said so, with where to look instead
    run = admin.superfluid("lock", "--check")
    assert run.code == 1 and f"names the mirror {mirror}, which is no longer a directory" in run.stderr
    assert "--mirror URL|DIR" in run.stderr and run.fixes == ()


def test_check_offline_suggests_the_check_online_which_rewrites_nothing(admin: Machine) -> None:
    path = _lock(admin, name="fleet.lock")
    before = path.read_bytes()
    node = machine_at(admin.cwd.parent, "node", SUPERFLUID_GITHUB_API=admin.env["SUPERFLUID_GITHUB_API"])
    shutil.copy(path, node.cwd / "fleet.lock")
    run = node.superfluid("lock", "--check", "--offline", "-o", "fleet.lock")
    assert run.code == 1 and "cache" in run.stderr
    fix = run.fix("lock")
    assert fix.argv == ("superfluid", "lock", "--check", "-o", "fleet.lock")
    assert fix.does == "fills the cache and checks the lock"
    pasted = cli.paste(fix, run, env=node.env, cwd=node.cwd)
    assert pasted.code == 0 and "fleet.lock: up to date" in pasted.stdout
    assert (node.cwd / "fleet.lock").read_bytes() == before and not (node.cwd / "superfluid.lock").exists()
    again = node.superfluid("lock", "--check", "--offline", "-o", "fleet.lock")  # the cache now holds it
    assert again.code == 0, again.stderr


# --- item 20: a lock that does not read: the fix writes it anew where it is --------------------------------------


def test_a_lock_of_another_schema_is_written_anew_at_its_own_path(admin: Machine, fleet_server: ReleaseServer) -> None:
    mirror = fleet_server.write_mirror(admin.cwd / "engines")
    path = _lock(admin, name="l2.lock")
    path.write_text(path.read_text().replace('schema = "superfluid-lock/1"', 'schema = "superfluid-lock/2"'))
    run = admin.superfluid("runtime", "install", "--locked", "l2.lock", "--mirror", "./engines")
    assert run.code == 1 and "l2.lock at schema: is superfluid-lock/2" in run.stderr
    assert "upgrade superfluid to read it" in run.stderr
    fix = run.fix("lock")
    assert fix.argv == ("superfluid", "lock", "--upgrade", "-o", "l2.lock", "--mirror", "./engines")
    assert fix.does == "writes it anew"
    pasted = cli.paste(fix, run, env=admin.env, cwd=admin.cwd)
    assert pasted.code == 0 and "--upgrade writes it anew" in pasted.stderr
    anew = lockfile.read(path)[0]  # the lock it was given for, now read; no ./superfluid.lock
    assert not (admin.cwd / "superfluid.lock").exists()
    assert {e.install for e in anew.engines if e.target.runtime == "basert"} == {"0.4.0-cpu"}
    assert all(a.url.startswith(mirror.resolve().as_uri()) for e in anew.engines for a in e.assets)


def test_a_lock_that_is_not_toml_names_the_same_fix(admin: Machine) -> None:
    (admin.cwd / "broken.lock").write_text("[[engine]\n")
    run = admin.superfluid("lock", "--check", "-o", "broken.lock")
    assert run.code == 1 and "is not valid TOML" in run.stderr and "restore it from version control" in run.stderr
    fix = run.fix("lock")
    assert fix.argv == ("superfluid", "lock", "--upgrade", "-o", "broken.lock")
    assert cli.paste(fix, run, env=admin.env, cwd=admin.cwd).code == 0
    assert lockfile.read(admin.cwd / "broken.lock")[0].engines


def test_no_lock_at_all_is_written_by_its_fix(admin: Machine) -> None:
    run = admin.superfluid("runtime", "install", "basert", "--locked", "--dry-run")
    assert run.code == 1 and "superfluid.lock: does not exist" in run.stderr
    fix = run.fix("lock")
    assert (fix.argv, fix.does) == (("superfluid", "lock"), "writes one")
    assert cli.paste(fix, run, env=admin.env, cwd=admin.cwd).code == 0
    assert admin.superfluid("runtime", "install", "basert", "--locked", "--dry-run").code == 0


# --- items 21, 27: mirror verify and sync ------------------------------------------------------------------------


def test_verify_of_a_fifo_names_it_and_suggests_nothing(admin: Machine) -> None:
    _lock(admin)
    os.mkfifo(admin.cwd / "pipe")
    run = admin.superfluid("mirror", "verify", "pipe", timeout=30)
    assert run.code == 2 and "pipe is a FIFO, not a mirror directory" in run.stderr
    assert run.fixes == () and "no such directory" not in run.stderr
    (admin.cwd / "plain").write_text("")
    run = admin.superfluid("mirror", "verify", "plain")
    assert run.code == 2 and "plain is a regular file, not a mirror directory" in run.stderr and run.fixes == ()


def test_verify_of_a_missing_mirror_suggests_the_sync_that_makes_it(admin: Machine) -> None:
    path = _lock(admin, name="fleet.lock")
    run = admin.superfluid("mirror", "verify", "engines", "--lock", "fleet.lock", "--json")
    assert run.code == 2 and "engines: no such file or directory (every file of fleet.lock is missing)" in run.stderr
    assert run.json()["error"]["fix"] == "superfluid mirror sync engines --lock fleet.lock"
    fix = run.fix("mirror", "sync")
    assert fix.does == "makes it and fetches every file"
    synced = cli.paste(fix, run, env=admin.env, cwd=admin.cwd)
    assert synced.code == 0 and (admin.cwd / "engines").is_dir()
    verified = admin.superfluid("mirror", "verify", "engines", "--lock", str(path), "--json")
    assert verified.code == 0, verified.stderr
    doc = verified.json()
    assert schema_errors(doc, "mirror-verify") == [] and doc["problems"] == [] and doc["verified"] > 0
    assert doc["lock"]["file"] == str(path) and doc["mirror"] == str(admin.cwd / "engines")


def test_sync_and_verify_json(admin: Machine) -> None:
    path = _lock(admin)
    run = admin.superfluid("mirror", "sync", "engines", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "mirror-sync") == [], doc
    lock = lockfile.read(path)[0]
    assert sorted(doc["fetched"]) == sorted({f.path for e in lock.engines for f in e.files()})
    assert doc["present"] == doc["replaced"] == [] and doc["listings"] and "superfluid:" not in run.stderr
    bundle = lock.engines[0].assets[0].path
    (admin.cwd / "engines" / bundle).write_bytes(b"tampered")
    run = admin.superfluid("mirror", "verify", "engines", "--json")
    assert run.code == 1
    doc = run.json()
    assert [p["path"] for p in doc["problems"]] == [bundle] and doc["error"]["code"]
    assert schema_errors({k: v for k, v in doc.items() if k != "error"}, "mirror-verify") == []
    again = admin.superfluid("mirror", "sync", "engines", "--json")
    assert again.code == 0 and again.json()["replaced"] == [bundle], again.stderr


# --- a mirror folder with other bytes: verify names them, sync fetches them again --------------------------------


def test_a_tampered_mirror_folder_is_told_the_verify_and_the_sync(admin: Machine) -> None:
    path = _lock(admin)
    assert admin.superfluid("mirror", "sync", "engines").code == 0
    bundle = lockfile.read(path)[0].engines[0].assets[0].path
    (admin.cwd / "engines" / bundle).write_bytes(b"tampered")
    node = machine_at(admin.cwd.parent, "node")
    shutil.copy(path, node.cwd / "superfluid.lock")
    mirror = str(admin.cwd / "engines")
    run = node.superfluid("runtime", "install", "--locked", "--mirror", mirror, "--json")
    assert run.code == 1 and node.installs("basert") == []
    error = run.json()["error"]
    assert "`" not in error["fix"] and error["fix"] == f"superfluid mirror verify {mirror}"
    assert "holds other bytes than were locked" in error["advice"]
    verify = cli.paste(run.fix("mirror", "verify"), run, env=node.env, cwd=node.cwd)
    assert verify.code == 1 and f"{bundle}: has SHA-256" in verify.stdout  # names every file that differs
    sync = cli.paste(run.fix("mirror", "sync"), run, env=node.env, cwd=node.cwd)
    assert sync.code == 0 and "replaced" in sync.stderr  # fetches them again
    assert node.superfluid("runtime", "install", "--locked", "--mirror", mirror).code == 0


# --- --offline install from a lock: the fix fills the cache ------------------------------------------------------


def test_an_offline_install_from_a_lock_is_told_what_fills_the_cache(admin: Machine) -> None:
    path = _lock(admin, name="fleet.lock")
    node = machine_at(admin.cwd.parent, "node")
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--offline")
    assert run.code == 1 and node.installs("basert") == []
    fix = run.fix("--locked")
    assert (fix.argv, fix.does) == (("superfluid", "runtime", "install", "basert", "--locked", str(path)),
                                    "fills the cache")
    assert cli.paste(fix, run, env=node.env, cwd=node.cwd).code == 0
    assert node.installs("basert") == ["0.4.0-cpu"]
    assert node.superfluid("runtime", "remove", "basert", "--all").code == 0
    assert node.superfluid("runtime", "install", "basert", "--locked", str(path), "--offline").code == 0


# --- item 26: a lock path given as a flag's value that is not a lock file is exit 2, naming it ---------------


def test_a_lock_flag_naming_no_lock_file_is_a_usage_error(admin: Machine, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    missing, folder, fifo = str(tmp_path / "missing"), str(tmp_path), str(tmp_path / "fifo")
    for argv, says in [
        (("runtime", "install", "--locked", missing), f"--locked {missing}: no such file or directory"),
        (("runtime", "install", "--locked", folder), f"--locked {folder} is a directory, not a lock file"),
        (("runtime", "install", "--locked", fifo), f"--locked {fifo} is a FIFO, not a lock file"),
        (("lock", "--check", "-o", missing), f"-o {missing}: no such file or directory"),
        (("lock", "-o", folder), f"-o {folder} is a directory, not a lock file"),
        (("mirror", "sync", "engines", "--lock", folder), f"--lock {folder} is a directory, not a lock file"),
        (("mirror", "verify", "engines", "--lock", fifo), f"--lock {fifo} is a FIFO, not a lock file"),
        (("mirror", "push", "oci://127.0.0.1:9/r", "--lock", missing), f"--lock {missing}: no such file"),
    ]:
        run = admin.superfluid(*argv, timeout=30)
        assert (run.code, run.fixes) == (2, ()), (argv, run.stderr)
        assert says in run.stderr, (argv, run.stderr)
    assert not (admin.cwd / "engines").exists()


# --- item 33: every scheme named; a dry run from a lock names no listing -----------------------------------------


def test_another_scheme_lists_every_scheme(admin: Machine) -> None:
    for argv in (("runtime", "install", "basert", "--mirror", "ftp://x"), ("lock", "--mirror", "ftp://x"),
                 ("runtime", "install", "--locked", "--mirror", "ftp://x")):
        run = admin.superfluid(*argv)
        assert run.code == 2, (argv, run.stderr)
        assert "ftp://x: not a mirror (a mirror is a directory, or a URL of http://, https://, file:// or oci://)" \
            in run.stderr, (argv, run.stderr)


def test_a_dry_run_from_a_lock_names_the_lock_not_a_listing(admin: Machine, fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    fleet_server.clear_log()
    run = admin.superfluid("runtime", "install", "basert", "--locked", "--dry-run")
    assert run.code == 0, run.stderr
    assert "listing" not in run.stdout and "as superfluid.lock pins it" in run.stdout
    assert fleet_server.log == []  # nothing read: not the listing, not the bytes
    doc = json.loads(admin.superfluid("runtime", "install", "basert", "--locked", "--dry-run", "--json").stdout)
    assert doc["installs"][0]["plans"][0]["assets"][0]["sha256"] in path.read_text()
    assert BASERT in path.read_text()
