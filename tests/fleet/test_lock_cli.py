"""``superfluid lock`` and ``runtime install --locked`` through the real CLI against the loopback
release server: basert and llama.cpp locked for linux-x64 cpu and cuda machines from declared host
facts, stable bytes, the check, the upgrade, and a lock whose digest differs refused (SPEC §12)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from superfluid.installer.fleet import lockfile
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.end_to_end import releases
from tests.fleet.conftest import BASERT, CUDA_BUNDLE, Machine, machine_at
from tests.release_server import ReleaseServer, sha256_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LOCK_ARGS = ("lock", "--runtime", "basert", "--runtime", "llamacpp", "--platform", "linux-x64",
             "--backend", "cpu", "--backend", "cuda")
BUNDLE = releases.bundle_name("0.4.0", "linux-x64")


def _lock(admin: Machine, *extra: str) -> Path:
    run = admin.superfluid(*LOCK_ARGS, *extra)
    assert run.code == 0, run.stderr
    return admin.cwd / "superfluid.lock"


def _sha(server: ReleaseServer, repo: str, tag: str, name: str) -> str:
    return next(a["digest"] for r in server.releases_json(repo) if r["tag_name"] == tag
                for a in r["assets"] if a["name"] == name).removeprefix("sha256:")


def test_locks_basert_and_llamacpp_for_cpu_and_cuda_machines(admin: Machine, fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    text = path.read_text()
    lock, _ = lockfile.read(path)
    got = {(e.target.runtime, e.target.host): (e.install, e.chosen_by, [a.name for a in e.assets])
           for e in lock.engines}
    assert got == {
        ("basert", "cpu"): ("0.4.0-cpu", "abi", [BUNDLE]),
        ("basert", "cuda"): ("0.4.0-cuda", "abi", [CUDA_BUNDLE]),
        ("llamacpp", "cpu"): ("b11642-cpu", "tested", ["llama-b11642-bin-ubuntu-x64.tar.gz"]),
        # a cuda machine declares a driver and no CUDA runtime: the build comes with its runtime archive
        ("llamacpp", "cuda"): ("b11642-cuda-13.4", "tested", ["llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz",
                                                              "cudart-llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz"]),
    }
    for e in lock.engines:  # every digest is the one the release states, settled as an install settles it
        for a in e.assets:
            tag = "v0.4.0" if e.target.runtime == "basert" else "b11642"
            assert a.sha256 == _sha(fleet_server, e.repo, tag, a.name) and a.size > 0
            assert a.url == fleet_server.download_url(e.repo, tag, a.name)
        assert e.abi == (1 if e.target.runtime == "basert" else None) and e.tested
    basert_cpu = next(e for e in lock.engines if e.target == lockfile.Target("basert", "linux-x64", "cpu"))
    assert basert_cpu.assets[0].checked == ("release", "api")
    assert [f.name for f in basert_cpu.evidence] == ["basert-engine-abi-1.txt", BUNDLE + ".sha256"]
    assert "NVIDIA driver 580" in next(e.why for e in lock.engines if e.target.host == "cuda")
    # the TOML parses back to the same content, valid against the schema
    doc = tomllib.loads(text)
    assert doc == lock.to_toml() and schema_errors(doc, "lock") == []
    assert (doc["schema"], doc["targets"]) == ("superfluid-lock/1", {
        "runtimes": ["basert", "llamacpp"], "platforms": ["linux-x64"], "backends": ["cuda", "cpu"]})
    # locking again against the same releases: the same bytes, into another file and onto this one
    other = admin.superfluid(*LOCK_ARGS, "-o", "again.lock")
    assert other.code == 0 and (admin.cwd / "again.lock").read_text() == text
    again = admin.superfluid("lock")  # the targets come from the lock itself
    assert again.code == 0 and "is up to date" in again.stdout and path.read_text() == text
    fresh = machine_at(admin.cwd.parent, "admin2", SUPERFLUID_GITHUB_API=fleet_server.url)
    assert fresh.superfluid(*LOCK_ARGS).code == 0 and (fresh.cwd / "superfluid.lock").read_text() == text


def test_one_changed_digest_in_the_file_makes_install_refuse(admin: Machine, fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    real = _sha(fleet_server, BASERT, "v0.4.0", BUNDLE)
    forged = hashlib.sha256(b"not the bundle").hexdigest()
    path.write_text(path.read_text().replace(real, forged))
    node = machine_at(admin.cwd.parent, "node", SUPERFLUID_GITHUB_API=fleet_server.url)
    run = node.superfluid("runtime", "install", "basert", "--locked", str(path))
    assert run.code == 1
    assert BUNDLE in run.stderr and f"SHA-256 {real}, expected {forged}" in run.stderr, run.stderr
    assert f"{path} pins {forged}" in run.stderr and "Traceback" not in run.stderr
    assert node.installs("basert") == []
    # its fix asks whether the release changed, of the lock it was given for
    fix = run.fix("lock", "--check")
    assert (fix.argv, fix.does) == (("superfluid", "lock", "--check", "-o", str(path)),
                                    "says whether the release changed")
    checked = cli.paste(fix, run, env=node.env, cwd=node.cwd)
    assert checked.code == 1 and f"({BUNDLE}: locked sha256 {forged}, now {real}" in checked.stdout


def test_install_locked_reads_no_listing_and_records_the_lock(admin: Machine, fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    node = machine_at(admin.cwd.parent, "node", SUPERFLUID_LOCK=str(path))
    fleet_server.clear_log()
    run = node.superfluid("runtime", "install", "basert", "--locked", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "locked-install") == []
    assert (doc["lock"]["sha256"], doc["kinds"], doc["installs"][0]["installed"]) == (digest, ["cpu"], "0.4.0-cpu")
    # the Sigstore bundle that may sit beside the bytes (a URL not of GitHub's releases: a mirror's), then
    # the bytes; nothing else
    asset = fleet_server.download_path(BASERT, "v0.4.0", BUNDLE)
    assert [r.path for r in fleet_server.log] == [asset + ".sigstore.json", asset]
    receipt = node.receipt("basert", "0.4.0-cpu")
    assert receipt["lock"] == {"file": str(path), "sha256": digest} and schema_errors(receipt, "runtime") == []
    rows = node.superfluid("runtimes", "--json").json()
    row = next(r for r in rows if r["id"] == "basert")
    assert row["lock"] == {"file": str(path), "sha256": digest} and schema_errors(rows, "runtimes") == []
    # again, offline: from the cache by the lock's digests, not one connection
    assert node.superfluid("runtime", "remove", "basert", "--all").code == 0
    fleet_server.clear_log()
    dry = node.superfluid("runtime", "install", "basert", "--locked", "--offline", "--dry-run")
    assert dry.code == 0 and "basert 0.4.0-cpu (abi, ABI 1)" in dry.stdout and node.installs("basert") == []
    run = node.superfluid("runtime", "install", "basert", "--locked", "--offline")
    assert run.code == 0, run.stderr
    assert "basert 0.4.0-cpu installed" in run.stdout and fleet_server.log == []


def test_a_cuda_machine_falls_back_to_the_cpu_engine_when_its_probe_refuses(admin: Machine,
                                                                            fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    node = machine_at(admin.cwd.parent, "gpu", SUPERFLUID_HOST_NVIDIA_DRIVER="580.95.05")
    run = node.superfluid("runtime", "install", "llamacpp", "--locked", str(path), "--json")
    assert run.code == 0, run.stderr
    result = run.json()["installs"][0]
    assert [p["install"] for p in result["plans"]] == ["b11642-cuda-13.4", "b11642-cpu"]
    assert result["installed"] == "b11642-cpu" and result["fallbacks"][0]["install"] == "b11642-cuda-13.4"
    assert "finds no cuda-13.4 device" in result["fallbacks"][0]["why"]


def test_a_platform_the_lock_lacks_is_refused_with_the_command_that_adds_it(admin: Machine,
                                                                           fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    releases.publish(fleet_server, [("0.4.0", 1)], platform="linux-arm64")  # baseRT 0.4.0 for arm64 too
    node = machine_at(admin.cwd.parent, "arm", SUPERFLUID_HOST_ARCH="arm64", SUPERFLUID_GITHUB_API=fleet_server.url)
    run = node.superfluid("runtime", "install", "--locked", str(path))
    assert run.code == 1 and "has no engine for linux-arm64" in run.stderr
    assert not (node.home / "runtimes").exists()
    # the fix names the lock it was given for (the node's working directory holds none)
    fix = run.fix("lock", "--platform", "linux-arm64")
    assert fix.argv == ("superfluid", "lock", "--platform", "linux-arm64", "-o", str(path)) and fix.does == "adds it"
    assert cli.paste(fix, run, env=node.env, cwd=node.cwd).code == 0
    added = {(e.target.runtime, e.target.platform) for e in lockfile.read(path)[0].engines}
    assert ("basert", "linux-arm64") in added and ("basert", "linux-x64") in added
    again = node.superfluid("runtime", "install", "basert", "--locked", str(path), "--dry-run")
    assert again.code == 0, again.stderr


def test_locked_refuses_flags_that_choose(admin: Machine) -> None:
    for flag in (["--version", "0.4.0"], ["--backend", "cpu"], ["--untested"], ["--sha256", "a" * 64]):
        run = admin.superfluid("runtime", "install", "basert", *flag, "--locked")
        assert run.code == 2 and "--locked installs what the lock names" in run.stderr


def test_check_reports_nothing_on_an_unchanged_source(admin: Machine) -> None:
    _lock(admin)
    run = admin.superfluid("lock", "--check")
    assert run.code == 0, run.stdout + run.stderr
    assert "up to date (4 engines" in run.stdout


def test_check_reports_a_new_abi_release_and_upgrade_writes_it(admin: Machine, fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    before = path.read_text()
    fleet_server.add_release(BASERT, "v0.4.1",
                             releases.release_assets("0.4.1", 1, variant="0.4.0", platform="linux-x64"),
                             sha256_files=True)
    run = admin.superfluid("lock", "--check")
    assert run.code == 1
    assert "~ basert linux-x64 (cpu): moved: a new ABI-1 release" in run.stdout
    assert "  - 0.4.0-cpu  basert-engine-linux-x64-0.4.0.tar.gz" in run.stdout
    assert "  + 0.4.1-cpu  basert-engine-linux-x64-0.4.1.tar.gz" in run.stdout
    assert "does not match what would be chosen now: 2 to move, 0 errors" in run.stderr  # cpu, and cuda -> 0.4.1-cpu
    assert path.read_text() == before
    assert admin.superfluid("lock").code == 0 and path.read_text() == before  # a plain lock keeps what is locked
    run = admin.superfluid("lock", "--upgrade", "llamacpp")
    assert run.code == 0 and path.read_text() == before  # llama.cpp did not move
    run = admin.superfluid("lock", "--upgrade", "basert")
    assert run.code == 0, run.stderr
    upgraded = {(e.target.runtime, e.target.host): e.install for e in lockfile.read(path)[0].engines}
    assert upgraded[("basert", "cpu")] == "0.4.1-cpu" and upgraded[("llamacpp", "cpu")] == "b11642-cpu"
    assert admin.superfluid("lock", "--check").code == 0


def test_check_reports_a_newer_tested_build(admin: Machine) -> None:
    """A lock written when b11284 was the newest tested build (by an older superfluid)."""
    path = _lock(admin)
    text = path.read_text()
    old = text.replace('version = "b11642"\nbackend = "cpu"', 'version = "b11284"\nbackend = "cpu"').replace(
        "download/b11642/llama-b11642-bin-ubuntu-x64", "download/b11284/llama-b11284-bin-ubuntu-x64").replace(
        '"llama-b11642-bin-ubuntu-x64.tar.gz"', '"llama-b11284-bin-ubuntu-x64.tar.gz"')
    assert old != text
    path.write_text(old)
    run = admin.superfluid("lock", "--check")
    assert run.code == 1
    assert "~ llamacpp linux-x64 (cpu): moved: a newer tested build" in run.stdout, run.stdout
    assert "  - b11284-cpu  llama-b11284-bin-ubuntu-x64.tar.gz" in run.stdout
    assert "1 to move, 0 errors" in run.stderr
    # its fix writes the new choice into the lock it was given for
    fix = run.fix("lock", "--upgrade")
    assert (fix.argv, fix.does) == (("superfluid", "lock", "--upgrade"), "writes the new choice")
    assert cli.paste(fix, run, env=admin.env, cwd=admin.cwd).code == 0
    assert "b11642-cpu" in {e.install for e in lockfile.read(path)[0].engines}
    assert admin.superfluid("lock", "--check").code == 0


def test_check_reports_bytes_changed_under_the_same_name_as_an_error(admin: Machine,
                                                                     fleet_server: ReleaseServer) -> None:
    path = _lock(admin)
    before = path.read_text()
    old_sha = _sha(fleet_server, BASERT, "v0.4.0", BUNDLE)
    replaced = releases.bundle("0.4.0", extra={"NOTICE": b"rebuilt\n"})
    fleet_server.add_asset(BASERT, "v0.4.0", BUNDLE, replaced)
    fleet_server.add_asset(BASERT, "v0.4.0", BUNDLE + ".sha256", sha256_line(BUNDLE, replaced))
    run = admin.superfluid("lock", "--check")
    assert run.code == 1
    new_sha = hashlib.sha256(replaced).hexdigest()
    assert (f"! basert linux-x64 (cpu): ERROR: a file's bytes changed under the same name ({BUNDLE}: locked "
            f"sha256 {old_sha}, now {new_sha}") in run.stdout, run.stdout
    assert "0 to move, 2 errors" in run.stderr  # the bundle, and its .sha256 beside it
    assert "nothing was written" in run.stderr and path.read_text() == before


def test_lock_from_a_mirror_and_of_nothing_installable(admin: Machine, fleet_server: ReleaseServer,
                                                       tmp_path: Path) -> None:
    mirror = fleet_server.write_mirror(tmp_path / "upstream")
    run = admin.superfluid("lock", "--runtime", "basert", "--platform", "linux-x64", "--mirror", str(mirror),
                           "-o", "m.lock")
    assert run.code == 0, run.stderr
    engine = lockfile.read(admin.cwd / "m.lock")[0].engines[0]
    assert engine.assets[0].url == (mirror / engine.assets[0].path).as_uri()
    run = admin.superfluid("lock", "--runtime", "basert", "--platform", "macos-x64", "-o", "none.lock")
    assert run.code == 1 and "nothing of basert installs on any machine asked" in run.stderr
    assert "baseRT publishes no bundle for macos-x64" in run.stderr
    assert not (admin.cwd / "none.lock").exists()
    run = admin.superfluid("lock", "--backend", "tpu")
    assert run.code == 2 and "not a kind of machine" in run.stderr
    # no runtime named: every runtime that installs on a machine asked (MLX is said not to, and left out)
    run = admin.superfluid("lock", "--platform", "linux-x64", "-o", "all.lock")
    assert run.code == 0, run.stderr
    assert "superfluid: mlx linux-x64 (cpu): not locked: " in run.stderr
    every = lockfile.read(admin.cwd / "all.lock")[0]
    assert every.runtimes == ("basert", "llamacpp") and every.backends == ("cpu",)
