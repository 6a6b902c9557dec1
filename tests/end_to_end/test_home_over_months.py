"""The home over months (issue 22), through the real CLI against the loopback release server: an
install's files verified later and put back by ``repair`` (offline, from the cache), the cache
measured and pruned while installs run, old installs collected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from superfluid.runtime.kernel.record import STAT_FACTS
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.end_to_end import releases
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

REPO = releases.REPO
LIB = "libbaseRT.dylib" if sys.platform == "darwin" else "libbaseRT.so"


def _install(cli_home: Home, server: ReleaseServer, *flags: str) -> Any:
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, *flags)
    assert run.code == 0, run.stderr
    return run


def _flip(path: Path, at: int = -1) -> None:
    """Flip one bit of one byte (by default the last: past what the loader reads, so the library still loads)."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _row(cli_home: Home, *flags: str) -> dict[str, Any]:
    run = cli_home.superfluid("runtimes", "--json", *flags)
    assert run.code == 0, run.stderr
    assert schema_errors(run.json(), "runtimes") == []
    return next(r for r in run.json() if r["id"] == "basert")  # type: ignore[no-any-return]


def _content(receipt: dict[str, Any]) -> dict[str, Any]:
    """A receipt without the stat facts of its files (``record.STAT_FACTS``: those of the files now there)."""
    return {**receipt, "files": [{k: v for k, v in f.items() if k not in STAT_FACTS} for f in receipt["files"]]}


def test_a_flipped_byte_is_named_and_repair_puts_it_back_offline(cli_home: Home, server: ReleaseServer) -> None:
    _install(cli_home, server)
    install = cli_home.basert / "0.4.0-cpu"
    receipt = cli_home.receipt("0.4.0-cpu")
    assert [f["path"] for f in receipt["files"]] == ["bin/superfluid-worker-basert", "lib/LICENSE", f"lib/{LIB}"]
    good = (install / "lib" / LIB).read_bytes()
    run = cli_home.superfluid("runtime", "verify", "basert")
    assert run.code == 0 and "basert 0.4.0-cpu: verified (3 files" in run.stdout, run.stderr
    assert "verified" not in _row(cli_home)  # runtimes shows nothing new by default

    _flip(install / "lib" / LIB)
    run = cli_home.superfluid("runtime", "verify", "basert")
    assert run.code == 1
    assert run.stdout.startswith(f"basert 0.4.0-cpu: changed lib/{LIB} (its SHA-256 is ")
    assert run.stderr == ("superfluid: basert 0.4.0-cpu does not match its receipt (1 changed): "
                          "`superfluid runtime repair basert 0.4.0-cpu` puts it back\n")
    doc = cli_home.superfluid("runtime", "verify", "basert", "0.4.0-cpu", "--json").json()
    assert schema_errors(doc, "verify") == [] and schema_errors({"error": doc["error"]}, "error") == []
    assert doc["ok"] is False and [c["path"] for c in doc["installs"][0]["changed"]] == [f"lib/{LIB}"]
    assert doc["error"]["code"] == "not-verified" and doc["installs"][0]["fix"] == \
        "superfluid runtime repair basert 0.4.0-cpu"
    row = _row(cli_home, "--verify")  # a glance sees it rewritten (its stat facts); --verify names the byte
    assert row["state"] == "changed" and "rewritten since it was installed" in row["ready"], row
    assert row["verified"] == "0.4.0-cpu does not match its receipt (1 changed)"
    assert row["fix"] == "superfluid runtime repair basert 0.4.0-cpu"

    server.clear_log()
    run = cli_home.superfluid("runtime", "repair", "basert", "--offline")
    assert run.code == 0, run.stderr
    assert server.log == []  # from the cache: no connection at all
    assert f"changed lib/{LIB}" in run.stderr
    assert run.stdout.startswith(f"superfluid: basert 0.4.0-cpu repaired: put back lib/{LIB} as its receipt records "
                                 "it (0.4.0, ABI 1, chosen by abi)\n"), run.stdout  # said as a repair (issue 35)
    assert (install / "lib" / LIB).read_bytes() == good
    assert cli_home.superfluid("runtime", "verify", "basert").code == 0
    after = cli_home.receipt("0.4.0-cpu")
    assert _content(after) == _content(receipt)  # put back exactly: the same sources, choice, install time and files
    assert after["files"] != receipt["files"]  # each file's stat facts are those of the files put back
    assert _row(cli_home, "--verify")["verified"] is True

    # an extra library in lib/ is a change too; a repair with nothing to do fetches and changes nothing
    (install / "lib" / "libextra.so").write_bytes(b"\x7fELF")
    run = cli_home.superfluid("runtime", "verify", "basert", "0.4.0-cpu")
    assert run.code == 1 and "added lib/libextra.so (a file of 4 bytes)" in run.stdout
    assert cli_home.superfluid("runtime", "repair", "basert", "--offline").code == 0
    assert not (install / "lib" / "libextra.so").exists()
    before = os.stat(install).st_ino
    run = cli_home.superfluid("runtime", "repair", "basert", "--json")
    assert run.code == 0, run.stderr
    assert schema_errors(run.json(), "repair-noop") == [] and run.json()["repaired"] is False
    assert os.stat(install).st_ino == before and server.log == []


def test_an_install_without_a_file_list_is_told_to_repair_never_a_crash(cli_home: Home, server: ReleaseServer) -> None:
    _install(cli_home, server)
    path = cli_home.basert / "0.4.0-cpu" / "runtime.json"
    doc = json.loads(path.read_text())
    del doc["files"]  # as an install made before receipts recorded files
    path.write_text(json.dumps(doc, indent=2) + "\n")
    run = cli_home.superfluid("runtime", "verify", "basert")
    assert run.code == 1 and "Traceback" not in run.stderr
    assert "no file list recorded" in run.stderr and "superfluid runtime repair basert 0.4.0-cpu" in run.stderr
    assert "no file list recorded" in _row(cli_home, "--verify")["verified"]
    assert _row(cli_home, "--verify")["state"] == "ready"  # nothing is known wrong: it is not verified, that is all
    run = cli_home.superfluid("runtime", "repair", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"superfluid: basert 0.4.0-cpu repaired: reinstalled in place from mirror "
                                 f"{server.mirror_url}"), run.stdout  # said as a repair (issue 35, item 17)
    assert "(broken: its receipt records no files) (0.4.0, ABI 1, chosen by abi)" in run.stdout
    assert "files" in cli_home.receipt("0.4.0-cpu")
    assert cli_home.superfluid("runtime", "verify", "basert").code == 0


def _blobs(cli_home: Home) -> dict[str, int]:
    folder = cli_home.path / "cache" / "sha256"
    return {p.name: p.stat().st_size for p in folder.iterdir()}


def test_prune_frees_the_archives_of_removed_installs_and_keeps_what_current_needs(cli_home: Home,
                                                                                  server: ReleaseServer) -> None:
    for version in ("0.3.0", "0.3.1", "0.4.0"):
        _install(cli_home, server, "--version", version)
    archives = {v: cli_home.receipt(f"{v}-cpu")["sources"][0]["sha256"] for v in ("0.3.0", "0.3.1", "0.4.0")}
    assert set(archives.values()) <= set(_blobs(cli_home))
    for version in ("0.3.0", "0.3.1"):
        assert cli_home.superfluid("runtime", "remove", "basert", f"{version}-cpu").code == 0
    du = cli_home.superfluid("cache", "du", "--json")
    assert du.code == 0 and schema_errors(du.json(), "cache-du") == []
    kinds = du.json()["kinds"]
    sizes = _blobs(cli_home)
    assert kinds["in_use"] == {"bytes": sizes[archives["0.4.0"]], "files": 1}
    assert kinds["unused"] == {"bytes": sizes[archives["0.3.0"]] + sizes[archives["0.3.1"]], "files": 2}

    before = _blobs(cli_home)
    dry = cli_home.superfluid("cache", "prune", "--older-than", "0s", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert schema_errors(dry.json(), "cache-prune") == [] and dry.json()["dry_run"] is True
    assert _blobs(cli_home) == before  # a dry run changes nothing
    run = cli_home.superfluid("cache", "prune", "--older-than", "0s", "--json")
    assert run.code == 0, run.stderr
    assert [r["path"] for r in run.json()["removed"]] == [r["path"] for r in dry.json()["removed"]]
    after = _blobs(cli_home)
    gone = {archives["0.3.0"], archives["0.3.1"]}
    assert gone <= set(before) - set(after) and archives["0.4.0"] in after
    # cache/sha256 shrinks by their sizes (and by nothing an install or the HTTP cache's last answers need)
    assert sum(before.values()) - sum(after.values()) == sum(before[d] for d in gone)
    assert run.json()["freed"] >= sum(before[d] for d in gone)
    text = cli_home.superfluid("cache", "prune", "--older-than", "0s")
    assert text.code == 0 and "nothing in" in text.stdout
    # what current needs is what its repair takes, offline
    _flip(cli_home.basert / "0.4.0-cpu" / "lib" / LIB)
    assert cli_home.superfluid("runtime", "repair", "basert", "--offline").code == 0
    assert cli_home.superfluid("runtime", "verify", "basert").code == 0
    # and what prune took is fetched again when asked for
    _install(cli_home, server, "--version", "0.3.1")


def test_a_kept_lock_keeps_its_archives(cli_home: Home, server: ReleaseServer, tmp_path: Path) -> None:
    _install(cli_home, server)
    lock = tmp_path / "superfluid.lock"
    run = cli_home.superfluid("lock", "--runtime", "basert", "--mirror", server.mirror_url, "-o", str(lock))
    assert run.code == 0, run.stderr
    archive = cli_home.receipt("0.4.0-cpu")["sources"][0]["sha256"]
    assert cli_home.superfluid("runtime", "remove", "basert", "--all").code == 0
    kept = cli_home.superfluid("cache", "prune", "--older-than", "0s", "--keep-lock", str(lock))
    assert kept.code == 0 and archive in _blobs(cli_home)
    du = cli_home.superfluid("cache", "du", "--json", "--keep-lock", str(lock)).json()
    assert du["kinds"]["in_use"]["files"] >= 1
    assert cli_home.superfluid("cache", "prune", "--older-than", "0s").code == 0
    assert archive not in _blobs(cli_home)
    missing = cli_home.superfluid("cache", "prune", "--keep-lock", str(tmp_path / "nope.lock"))
    assert missing.code == 2 and "--keep-lock" in missing.stderr and "no such file" in missing.stderr


def test_a_prune_leaves_the_partial_of_a_live_download(cli_home: Home, server: ReleaseServer) -> None:
    """A download stalled mid-body holds its partial's flock: a prune of everything (0s) leaves it,
    and the install resumes and succeeds."""
    name = releases.bundle_name("0.4.0")
    server.fault(server.mirror_path(REPO, "v0.4.0", name), "stall", after=2000, seconds=5.0)
    proc = cli_home.popen("runtime", "install", "basert", "--mirror", server.mirror_url)
    partial = cli_home.path / "cache" / "partial"
    deadline = time.monotonic() + 60
    # the partial exists once the download starts (its first bytes may sit in a buffer until the stall ends)
    while not any(partial.glob("*.partial")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    run = cli_home.superfluid("cache", "prune", "--older-than", "0s", "--json")
    assert run.code == 0, run.stderr
    assert proc.poll() is None, "the download ended before the prune: nothing was proved"
    assert not [r for r in run.json()["removed"] if r["kind"] == "partial"]
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert cli_home.superfluid("runtime", "verify", "basert").code == 0


PRUNER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from superfluid.installer.cache import prune
    from superfluid.installer.home.gc import in_use
    from superfluid.runtime.kernel.layout import cache_dir

    cli_home, marker = sys.argv[1], sys.argv[2]
    real = prune._remove

    def remove(root, item):  # the prune holds its lock, mid-deletion, until the test says go
        if not Path(marker).exists():
            Path(marker + ".tmp").write_text(str(os.getpid()))
            os.replace(marker + ".tmp", marker)
            while not Path(marker + ".go").exists():
                time.sleep(0.01)
        real(root, item)

    prune._remove = remove
    done = prune.prune(cache_dir(cli_home), in_use(str(cli_home)), grace=0.0)
    print(len(done.removed))
""")


def test_an_install_started_during_a_prune_succeeds(cli_home: Home, server: ReleaseServer, tmp_path: Path) -> None:
    """The prune holds the cache's lock while it deletes the very archive an install is about to
    use (0.3.1's, of a removed install): the install waits for it, misses the blob, fetches it
    again and succeeds."""
    _install(cli_home, server, "--version", "0.3.1")
    _install(cli_home, server, "--version", "0.4.0")
    assert cli_home.superfluid("runtime", "remove", "basert", "0.3.1-cpu").code == 0
    marker = tmp_path / "pruning"
    pruner = subprocess.Popen([cli.script("python"), "-c", PRUNER, str(cli_home.path), str(marker)],
                              env=cli_home.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert pruner.poll() is None and time.monotonic() < deadline, pruner.communicate()
            time.sleep(0.01)
        install = cli_home.popen("runtime", "install", "basert", "--mirror", server.mirror_url, "--version", "0.3.1")
        time.sleep(1.5)
        assert install.poll() is None  # waiting on the prune (an install from a warm cache takes ~0.5 s), not failed
        server.clear_log()
        go = time.monotonic()
        (tmp_path / "pruning.go").write_text("")
        out, err = install.communicate(timeout=120)
        assert install.returncode == 0, err
        pout, perr = pruner.communicate(timeout=60)
        assert pruner.returncode == 0 and int(pout) >= 1, perr
        bundle = server.mirror_path(REPO, "v0.3.1", releases.bundle_name("0.3.1"))
        fetched = [r for r in server.log if r.path == bundle]
        assert fetched and fetched[0].time > go  # the prune took the blob; the install fetched it again
    finally:
        for proc in (pruner,):
            if proc.poll() is None:
                proc.kill()
    assert "0.3.1-cpu" in cli_home.installs()
    assert cli_home.superfluid("runtime", "verify", "basert", "0.3.1-cpu").code == 0


def test_gc_keeps_current_and_pinned_and_what_a_lock_names(cli_home: Home, server: ReleaseServer,
                                                           tmp_path: Path) -> None:
    for version in ("0.3.0", "0.3.1", "0.4.0"):
        _install(cli_home, server, "--version", version)
    assert cli_home.superfluid("runtime", "use", "basert", "0.3.0-cpu").code == 0
    dry = cli_home.superfluid("runtime", "gc", "basert", "--keep", "1", "--dry-run", "--json")
    assert dry.code == 0 and schema_errors(dry.json(), "gc") == []
    assert dry.json()["removed"] == ["0.3.1-cpu"] and cli_home.installs() == ["0.3.0-cpu", "0.3.1-cpu", "0.4.0-cpu"]
    run = cli_home.superfluid("runtime", "gc", "basert", "--keep", "1")
    assert run.code == 0, run.stderr
    assert "removed 0.3.1-cpu" in run.stdout and "0.3.0-cpu (ready: current, pinned)" in run.stdout
    assert cli_home.installs() == ["0.3.0-cpu", "0.4.0-cpu"] and cli_home.current() == "0.3.0-cpu"
    assert cli_home.leftovers() == []
    assert cli_home.superfluid("runtime", "use", "basert", "--auto").code == 0
    lock = tmp_path / "superfluid.lock"
    assert cli_home.superfluid("lock", "--runtime", "basert", "--mirror", server.mirror_url, "-o", str(lock)).code == 0
    run = cli_home.superfluid("runtime", "gc", "basert", "--keep", "0", "--lock", str(lock))
    assert run.code == 0 and "0.4.0-cpu (ready: current, named by" in run.stdout, run.stdout
    assert cli_home.installs() == ["0.4.0-cpu"]
    assert cli_home.superfluid("runtime", "gc", "basert", "--keep", "x").code == 2
    assert cli_home.superfluid("runtime", "gc", "basert", "--keep", "-1").code == 2
    assert cli_home.superfluid("runtime", "gc", "nope").code == 2


def test_gc_counts_the_installs_this_superfluid_drives_first(cli_home: Home, server: ReleaseServer) -> None:
    """Issue 35, item 18: with an untested 0.5.0-cpu (ABI 2) beside the tested 0.4.0-cpu, --keep 1 kept
    the untested one as "the newest" and removed the one this superfluid drives. The installs it
    drives count first; the removal says why (docs/cli.md, runtime gc)."""
    for flags in (("--version", "0.3.1"), ("--version", "0.4.0"), ("--version", "0.5.0", "--untested")):
        _install(cli_home, server, *flags)
    assert cli_home.superfluid("runtime", "use", "basert", "0.3.1-cpu").code == 0
    run = cli_home.superfluid("runtime", "gc", "basert", "--keep", "1")
    assert run.code == 0, run.stderr
    assert run.stdout == (
        "superfluid: basert: removed 0.5.0-cpu (untested: this superfluid does not drive it, and the newest 1 count "
        "the installs it drives first)\n"
        "superfluid: basert: kept 0.3.1-cpu (ready: current, pinned), 0.4.0-cpu (ready: one of the newest 1)\n")
    assert cli_home.installs() == ["0.3.1-cpu", "0.4.0-cpu"]
    _install(cli_home, server, "--version", "0.5.0", "--untested")
    doc = cli_home.superfluid("runtime", "gc", "basert", "--keep", "3", "--json").json()
    assert schema_errors(doc, "gc") == [] and doc["removed"] == []  # room for it: kept, and said untested
    assert {"install": "0.5.0-cpu", "state": "untested",
            "why": "one of the newest 3, counted after the installs this superfluid drives"} in doc["kept"]
