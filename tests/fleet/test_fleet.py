"""A fleet, end to end, as docs/fleet.md's walkthrough runs it: one machine locks against the
loopback GitHub fake, syncs a mirror served by a plain static HTTP server, and three machines (three
SUPERFLUID_HOMEs, real processes, at once) install ``--locked`` from it; the release server sees no
request from them (SPEC §12)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from superfluid.installer.fleet import lockfile
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.conftest import ROOT
from tests.fleet.conftest import BASERT, Machine, machine_at, static_server
from tests.release_server import ReleaseServer

DOC_MIRROR = "https://mirror.example.org/engines/"


def walkthrough() -> list[list[str]]:
    """The commands of docs/fleet.md's walkthrough, in order (comments dropped)."""
    text = (ROOT / "docs" / "fleet.md").read_text()
    block = text.split("## Walkthrough", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.splitlines() if line.startswith("superfluid ")]


def test_the_walkthrough_names_each_step() -> None:
    steps = [" ".join(argv[1:3]) for argv in walkthrough()]
    assert steps == ["lock --runtime", "lock --check", "mirror sync", "mirror verify", "runtime install",
                     "runtimes --json"]


def test_one_lock_one_mirror_three_machines(tmp_path: Path, admin: Machine, fleet_server: ReleaseServer) -> None:
    steps = walkthrough()
    for argv in steps[:4]:  # the admin machine: lock, check, sync, verify
        run = admin.superfluid(*argv[1:])
        assert run.code == 0, (argv, run.stdout, run.stderr)
    lock_path = admin.cwd / "superfluid.lock"
    lock, digest = lockfile.read(lock_path)
    mirror = admin.cwd / "engines"
    assert (mirror / "basecompute/baseRT/releases.json").is_file()
    files = {f.path for e in lock.engines for f in e.files()}
    assert {str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file() and p.name != "releases.json"} == files

    # re-running the sync fetches nothing: every file is in place with its digest
    fleet_server.clear_log()
    again = admin.superfluid("mirror", "sync", "engines", "--lock", "superfluid.lock")
    assert again.code == 0 and f"0 fetched, {len(files)} already in place" in again.stdout
    assert fleet_server.log == []

    httpd, thread, url = static_server(mirror)
    try:
        nodes = [machine_at(tmp_path, f"node{i}") for i in range(3)]
        install = [url if a == DOC_MIRROR else a for a in steps[4][1:]]
        fleet_server.clear_log()
        for node in nodes:
            shutil.copy(lock_path, node.cwd / "superfluid.lock")  # each machine checks the lock out
        procs = [node.popen(*install) for node in nodes]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], outs
        assert fleet_server.log == []  # not one request reached the release server: not a listing, not a byte
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

    sources = []
    for node in nodes:
        installed = {r: node.installs(r) for r in ("basert", "llamacpp")}
        assert installed == {"basert": ["0.4.0-cpu"], "llamacpp": ["b11642-cpu"]}
        receipts = [node.receipt("basert", "0.4.0-cpu"), node.receipt("llamacpp", "b11642-cpu")]
        for r in receipts:
            assert r["lock"]["sha256"] == digest and schema_errors(r, "runtime") == []
            assert all(s["url"].startswith(url) for s in r["sources"])
        sources.append([(s["url"].removeprefix(url), s["sha256"]) for r in receipts for s in r["sources"]])
    locked = [(a.path, a.sha256) for e in lock.engines if e.target.host == "cpu" for a in e.assets]
    assert sources[0] == sources[1] == sources[2] and sorted(sources[0]) == sorted(locked)

    rows = nodes[0].superfluid(*steps[5][1:])
    assert rows.code == 0, rows.stderr
    for row in rows.json():
        if row["id"] in ("basert", "llamacpp"):
            assert row["state"] == "ready" and row["lock"]["sha256"] == digest, row


def test_sync_resumes_verifies_and_the_mirror_serves_a_plain_install(tmp_path: Path, admin: Machine,
                                                                     fleet_server: ReleaseServer) -> None:
    run = admin.superfluid("lock", "--runtime", "basert", "--platform", "linux-x64")
    assert run.code == 0, run.stderr
    lock = lockfile.read(admin.cwd / "superfluid.lock")[0]
    bundle = lock.engines[0].assets[0]
    mirror = admin.cwd / "engines"
    # a listing already in the mirror is merged into, not replaced
    listing = mirror / "basecompute/baseRT/releases.json"
    listing.parent.mkdir(parents=True)
    listing.write_text(json.dumps([{"tag_name": "v9.9.9", "assets": [{"name": "other.tar.gz", "size": 1}]}]))
    fleet_server.fault(fleet_server.download_path(BASERT, "v0.4.0", bundle.name), "cut", after=2000)
    run = admin.superfluid("mirror", "sync", "engines")
    assert run.code == 0, run.stderr  # the cut download resumed (Range) and was verified
    bundle_path = fleet_server.download_path(BASERT, "v0.4.0", bundle.name)
    ranged = [r for r in fleet_server.requests_to(bundle_path) if r.header("range")]
    assert ranged and ranged[0].header("range") == "bytes=2000-"
    tags = [r["tag_name"] for r in json.loads(listing.read_text())]
    assert tags == ["v9.9.9", "v0.4.0"]
    assert admin.superfluid("mirror", "verify", "engines").code == 0

    # a file with other bytes is named by verify, and replaced by the next sync
    target = mirror / bundle.path
    target.write_bytes(b"tampered")
    run = admin.superfluid("mirror", "verify", "engines")
    assert run.code == 1 and f"{bundle.path}: has SHA-256" in run.stdout and f"pins {bundle.sha256}" in run.stdout
    (mirror / lock.engines[0].evidence[0].path).unlink()
    run = admin.superfluid("mirror", "verify", "engines")
    assert run.code == 1 and "is missing" in run.stdout and "2 problems against superfluid.lock" in run.stderr
    run = cli.paste(run.fix("mirror", "sync", "engines"), run, env=admin.env, cwd=admin.cwd)  # fetches them again
    assert run.code == 0 and "held other bytes than the lock pins: replaced" in run.stderr
    assert admin.superfluid("mirror", "verify", "engines").code == 0

    # the mirror is a whole mirror of the locked release: a plain --mirror install chooses from it
    node = machine_at(tmp_path, "node")
    run = node.superfluid("runtime", "install", "basert", "--mirror", str(mirror))
    assert run.code == 0, run.stderr
    assert node.installs("basert") == ["0.4.0-cpu"] and node.receipt("basert", "0.4.0-cpu")["abi"] == 1
