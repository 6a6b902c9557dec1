"""``superfluid runtime install basert`` end to end: the real CLI in a subprocess, fixture releases
of the reference engine on the loopback server, a fresh SUPERFLUID_HOME (SPEC §4.1, §8)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.end_to_end import releases
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

REPO = releases.REPO


def _install(home: Home, server: ReleaseServer, *flags: str) -> object:
    return home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, *flags)


def test_installs_newest_abi_1_release_not_0_5_0(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server)
    assert run.code == 0, run.stderr
    assert "basert 0.4.0-cpu installed (0.4.0, ABI 1" in run.stdout
    assert cli_home.installs() == ["0.4.0-cpu"] and cli_home.current() == "0.4.0-cpu"
    r = cli_home.receipt("0.4.0-cpu")
    assert (r["version"], r["tested"], r["abi"], r["chosen_by"]) == ("0.4.0", True, 1, "abi")
    assert r["worker"] == "bin/superfluid-worker-basert" and r["platforms"] == [releases.host_platform()]
    assert r["sources"][0]["url"].endswith("/v0.4.0/" + releases.bundle_name("0.4.0"))
    assert schema_errors(r, "runtime") == []
    assert cli_home.leftovers() == []
    # `superfluid runtimes` shows it ready, with its ABI
    rows = cli_home.superfluid("runtimes", "--json").json()
    row = next(x for x in rows if x["id"] == "basert")
    assert (row["state"], row["ready"], row["abi"], row["install"]) == ("ready", True, 1, "0.4.0-cpu")


def test_version_0_5_0_refused_by_number(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server, "--version", "0.5.0")
    assert run.code == 1
    command = f"superfluid runtime install basert --version 0.5.0 --untested --mirror {server.mirror_url}"
    assert run.stderr.strip() == ("superfluid: baseRT 0.5.0 states ABI 2; this superfluid drives ABI 1: the newest it "
                                  f"drives is 0.4.0: `{command}` installs 0.5.0 anyway")
    assert cli_home.installs() == []
    # the hint, pasted as it reads (issue 35, item 4), does what it says; --json carries it as the fix
    as_json = _install(cli_home, server, "--version", "0.5.0", "--json")
    assert as_json.json()["error"]["fix"] == command  # a command a shell runs, no backticks (issue 42)
    pasted = cli.paste(run.fix("--untested"), run, env=cli_home.env)
    assert pasted.code == 0 and cli_home.installs() == ["0.5.0-cpu"], pasted.stderr
    cli_home.superfluid("runtime", "remove", "basert", "--all")
    assert cli_home.installs() == []


def test_version_0_5_0_untested_installs_recorded_untested(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server, "--version", "0.5.0", "--untested", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "install-result") == []
    r = cli_home.receipt("0.5.0-cpu")
    assert (r["tested"], r["abi"], r["chosen_by"]) == (False, 2, "untested")
    assert doc["receipt"]["tested"] is False and doc["installed"] == "0.5.0-cpu"


def test_unnumbered_0_3_0_by_line_and_0_2_6_refused(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server, "--version", "0.3.0")
    assert run.code == 0, run.stderr
    r = cli_home.receipt("0.3.0-cpu")
    assert (r["tested"], r["abi"], r["chosen_by"]) == (True, None, "line")
    run = _install(cli_home, server, "--version", "0.2.6")
    assert run.code == 1 and "only the unnumbered 0.3.x line carries ABI 1" in run.stderr
    assert "--version 0.2.6 --untested --mirror" in run.stderr and "` installs 0.2.6 anyway" in run.stderr


def test_release_whose_abi_asset_disagrees_with_its_name_is_refused(cli_home: Home, server: ReleaseServer) -> None:
    server.add_release(REPO, "v0.6.0", releases.release_assets("0.6.0", 1, variant="0.4.0", abi_text="2\n"),
                       sha256_files=True)
    run = _install(cli_home, server, "--version", "0.6.0")
    assert run.code == 1
    assert "v0.6.0 asset basert-engine-abi-1.txt: states '2\\n' where its name says ABI 1" in run.stderr
    assert cli_home.installs() == []
    # never chosen on its own: the newest consistent release of ABI 1 is
    run = _install(cli_home, server)
    assert run.code == 0 and cli_home.installs() == ["0.4.0-cpu"]


def test_wrong_digest_installs_nothing_and_old_install_keeps_serving(cli_home: Home, server: ReleaseServer) -> None:
    assert _install(cli_home, server, "--version", "0.3.1").code == 0
    name = releases.bundle_name("0.4.0")
    server.fault(server.mirror_path(REPO, "v0.4.0", name), "wrong_bytes", times=100)
    run = _install(cli_home, server)
    assert run.code == 1
    assert "SHA-256" in run.stderr and "expected" in run.stderr
    assert cli_home.installs() == ["0.3.1-cpu"] and cli_home.current() == "0.3.1-cpu"
    assert cli_home.leftovers() == []
    rows = cli_home.superfluid("runtimes", "--json").json()
    assert next(x for x in rows if x["id"] == "basert")["state"] == "ready"


def test_abi_asset_bytes_disagreeing_with_listing_are_fatal(cli_home: Home, server: ReleaseServer) -> None:
    server.fault(server.mirror_path(REPO, "v0.4.0", "basert-engine-abi-1.txt"), "wrong_bytes", times=100)
    run = _install(cli_home, server)
    assert run.code == 1
    assert "v0.4.0 asset basert-engine-abi-1.txt: its bytes have SHA-256" in run.stderr
    assert "the listing's digest is" in run.stderr
    assert cli_home.installs() == [] and cli_home.leftovers() == []


def test_sha256_file_disagreeing_with_listing_is_fatal(cli_home: Home, server: ReleaseServer) -> None:
    name = releases.bundle_name("0.4.0")
    server.add_asset(REPO, "v0.4.0", name + ".sha256", f"{'0' * 64}  {name}\n".encode())
    run = _install(cli_home, server, "--version", "0.4.0")
    assert run.code == 1
    assert "0" * 64 in run.stderr and "listing's digest" in run.stderr
    assert cli_home.installs() == []


def test_two_concurrent_installs_end_consistent(cli_home: Home, server: ReleaseServer) -> None:
    procs = [cli_home.popen("runtime", "install", "basert", "--mirror", server.mirror_url) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert cli_home.installs() == ["0.4.0-cpu"] and cli_home.current() == "0.4.0-cpu"
    assert cli_home.receipt("0.4.0-cpu")["abi"] == 1
    assert cli_home.leftovers() == []
    check = cli_home.superfluid("runtimes", "--json").json()
    assert next(x for x in check if x["id"] == "basert")["ready"] is True


def test_sigkill_mid_install_leaves_old_serving_and_next_run_cleans_up(cli_home: Home, server: ReleaseServer) -> None:
    assert _install(cli_home, server, "--version", "0.3.1").code == 0
    proc = cli_home.popen("runtime", "install", "basert", "--mirror", server.mirror_url)
    deadline = time.monotonic() + 60
    staged = []
    while time.monotonic() < deadline and proc.poll() is None:
        staged = [n for n in cli_home.leftovers() if n.startswith(".staging-")]
        if staged and list((cli_home.basert / staged[0] / "lib").glob("libbaseRT*")):
            break
        time.sleep(0.002)
    assert staged, "the install finished before it could be killed mid-way"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert any(n.startswith(".staging-") for n in cli_home.leftovers())
    assert cli_home.current() == "0.3.1-cpu" and cli_home.receipt("0.3.1-cpu")["version"] == "0.3.1"
    rows = cli_home.superfluid("runtimes", "--json").json()
    assert next(x for x in rows if x["id"] == "basert")["install"] == "0.3.1-cpu"
    run = _install(cli_home, server)
    assert run.code == 0, run.stderr
    assert cli_home.leftovers() == []
    assert cli_home.installs() == ["0.3.1-cpu", "0.4.0-cpu"] and cli_home.current() == "0.4.0-cpu"


def test_dry_run_changes_nothing_and_warm_costs_no_listing_body(cli_home: Home, server: ReleaseServer) -> None:
    run = _install(cli_home, server, "--dry-run", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "plan") == []
    assert [p["install"] for p in doc["plans"]] == ["0.4.0-cpu"]
    plan = doc["plans"][0]
    assert (plan["chosen_by"], plan["abi"], plan["tested"]) == ("abi", 1, True)
    assert plan["assets"][0]["sha256"] and plan["assets"][0]["digest_source"] == "release"
    assert not (cli_home.path / "runtimes").exists()
    server.clear_log()
    run = _install(cli_home, server, "--dry-run")
    assert run.code == 0 and "1. basert 0.4.0-cpu" in run.stdout
    assert [(r.path, r.status) for r in server.log] == [(server.mirror_path(REPO), 304)]
    assert not (cli_home.path / "runtimes").exists()


def test_offline_dry_run_after_a_warm_run_opens_no_connection(cli_home: Home, server: ReleaseServer) -> None:
    assert _install(cli_home, server).code == 0
    server.clear_log()
    run = _install(cli_home, server, "--offline", "--dry-run")
    assert run.code == 0, run.stderr
    assert server.log == []
    run = cli_home.superfluid("runtime", "install", "basert", "--offline", "--mirror", server.mirror_url, "--version",
                              "0.4.0")
    assert run.code == 0, run.stderr
    assert server.log == []


def test_mirror_directory(cli_home: Home, server: ReleaseServer, tmp_path: object) -> None:
    root = releases.make_mirror(cli_home.path.parent / "mirror")
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", str(root))
    assert run.code == 0, run.stderr
    r = cli_home.receipt("0.4.0-cpu")
    assert r["sources"][0]["url"].startswith("file://")
    assert r["mirror"] == root.resolve().as_uri() + "/"  # the root, recorded as a value


def test_from_local_bundle_without_digest_warns_and_records_it(cli_home: Home, engines: object) -> None:
    path = cli_home.path.parent / releases.bundle_name("0.3.1")
    path.write_bytes(releases.bundle("0.3.1"))
    run = cli_home.superfluid("runtime", "install", "basert", "--from", str(path))
    assert run.code == 0, run.stderr
    assert "has no SHA-256 to check it against" in run.stderr
    r = cli_home.receipt("0.3.1-cpu")
    import hashlib

    assert r["chosen_by"] == "from" and r["tested"] is True and r["abi"] == 1
    assert r["sources"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_from_other_abi_needs_untested(cli_home: Home, engines: object) -> None:
    path = cli_home.path.parent / releases.bundle_name("0.5.0")
    path.write_bytes(releases.bundle("0.5.0"))
    run = cli_home.superfluid("runtime", "install", "basert", "--from", str(path))
    assert run.code == 1 and "states ABI 2" in run.stderr and "--untested` installs it untested" in run.stderr
    assert cli_home.installs() == [] and cli_home.leftovers() == []
    run = cli_home.superfluid("runtime", "install", "basert", "--from", str(path), "--untested")
    assert run.code == 0, run.stderr
    r = cli_home.receipt("0.5.0-cpu")
    assert (r["tested"], r["abi"], r["chosen_by"]) == (False, 2, "from")


def test_bundle_with_a_broken_library_is_refused_even_untested(cli_home: Home, server: ReleaseServer) -> None:
    server.add_release(REPO, "v0.7.0", releases.release_assets("0.7.0", 3, variant="missing-symbol"),
                       sha256_files=True)
    run = _install(cli_home, server, "--version", "0.7.0", "--untested")
    assert run.code == 1 and "lacks baseRT_decode_step" in run.stderr
    assert cli_home.installs() == [] and cli_home.leftovers() == []


def test_bundle_whose_library_is_another_version_is_refused(cli_home: Home, server: ReleaseServer) -> None:
    server.add_release(REPO, "v0.4.1", releases.release_assets("0.4.1", 1, variant="0.4.0"), sha256_files=True)
    run = _install(cli_home, server)
    assert run.code == 1 and "the bundle of basert 0.4.1 holds a library of version 0.4.0" in run.stderr
    assert cli_home.installs() == []


def test_update_repair_use_remove(cli_home: Home, server: ReleaseServer) -> None:
    assert _install(cli_home, server, "--version", "0.3.1").code == 0
    assert cli_home.superfluid("runtime", "use", "basert", "0.3.1-cpu").code == 0
    run = cli_home.superfluid("runtime", "update", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    assert cli_home.installs() == ["0.3.1-cpu", "0.4.0-cpu"]
    assert cli_home.current() == "0.4.0-cpu" and "the pin moved from 0.3.1-cpu" in run.stderr
    run = cli_home.superfluid("runtime", "update", "basert", "--mirror", server.mirror_url)
    assert run.code == 0 and "nothing newer" in run.stdout
    # repair rewrites an install in place from its receipt
    (cli_home.basert / "0.4.0-cpu" / "lib" / "libbaseRT.so").unlink(missing_ok=True)
    for lib in (cli_home.basert / "0.4.0-cpu" / "lib").glob("libbaseRT*"):
        lib.unlink()
    assert next(x for x in cli_home.superfluid("runtimes", "--json").json() if x["id"] == "basert")["state"] == "broken"
    run = cli_home.superfluid("runtime", "repair", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("superfluid: basert 0.4.0-cpu repaired: put back lib/libbaseRT.so as its receipt "
                                 "records it (0.4.0, ABI 1, chosen by abi)\n"), run.stdout  # a repair (issue 35)
    assert next(x for x in cli_home.superfluid("runtimes", "--json").json() if x["id"] == "basert")["ready"] is True
    run = cli_home.superfluid("runtime", "use", "basert", "--auto")
    assert run.code == 0 and "0.4.0-cpu" in run.stdout
    run = cli_home.superfluid("runtime", "remove", "basert", "0.4.0-cpu")
    assert run.code == 0 and "removed basert 0.4.0-cpu" in run.stdout and cli_home.current() == "0.3.1-cpu"
    run = cli_home.superfluid("runtime", "remove", "basert", "9.9.9-cpu")
    assert run.code == 1 and "has no install 9.9.9-cpu" in run.stderr
    assert cli_home.superfluid("runtime", "remove", "basert", "--all").code == 0
    assert cli_home.installs() == [] and cli_home.current() is None


@pytest.mark.parametrize("argv,fragment", [
    (["runtime", "install", "basert", "--sha256", "xyz"], "is not a SHA-256"),
    (["runtime", "install", "nope"], "no runtime 'nope'"),
    (["runtime", "install", "basert", "--version", "../x"], "is not a version"),
    (["runtime", "install", "basert", "--mirror", "/does/not/exist"], "no such directory"),
    (["runtime", "install", "basert", "--from", "/no/such.tar.gz"], "--from /no/such.tar.gz: no such file"),
    (["runtime", "use", "basert"], "needs an install"),
])
def test_usage_errors_exit_2(cli_home: Home, argv: list[str], fragment: str) -> None:
    run = cli_home.superfluid(*argv)
    assert run.code == 2 and fragment in run.stderr and "Traceback" not in run.stderr
    assert "installing" not in run.stderr  # refused before anything was looked up


def test_github_api_with_token_and_object_store_redirect(cli_home: Home, engines: object) -> None:
    with ReleaseServer(object_store=True) as gh:
        releases.publish(gh)
        cli_home.env.update(SUPERFLUID_GITHUB_API=gh.url, GITHUB_TOKEN="t0ken-for-the-api-only")
        run = cli_home.superfluid("runtime", "install", "basert")
        assert run.code == 0, run.stderr
        assert cli_home.receipt("0.4.0-cpu")["abi"] == 1
        api = [r for r in gh.log if r.server == "api" and r.path.startswith("/repos/")]
        objects = [r for r in gh.log if r.server == "objects"]
        assert api and all(r.header("Authorization") == "Bearer t0ken-for-the-api-only" for r in api)
        assert objects and all(r.header("Authorization") is None for r in objects)
        downloads = [r for r in gh.log if r.server == "api" and "/releases/download/" in r.path]
        assert downloads and all(r.header("Authorization") is None for r in downloads)


def test_mirror_that_is_a_github_shaped_api_server(cli_home: Home, engines: object) -> None:
    # no releases.json at the root: the listing is the API's, the bytes come from its download URLs
    # (redirected to an object store), and no token is sent to a mirror
    with ReleaseServer(object_store=True) as gh:
        releases.publish(gh)
        cli_home.env["GITHUB_TOKEN"] = "t0ken-never-for-a-mirror"
        run = cli_home.superfluid("runtime", "install", "basert", "--mirror", gh.url)
        assert run.code == 0, run.stderr
        r = cli_home.receipt("0.4.0-cpu")
        assert (r["version"], r["abi"], r["chosen_by"]) == ("0.4.0", 1, "abi")
        assert r["sources"][0]["url"] == gh.download_url(REPO, "v0.4.0", releases.bundle_name("0.4.0"))
        assert r["mirror"] == gh.url.rstrip("/") + "/"  # the root named, whatever the download URLs are
        assert [r.status for r in gh.log if r.path.startswith(gh.listing_path(REPO))] == [200]
        assert any(r.server == "objects" for r in gh.log)
        assert all(r.header("Authorization") is None for r in gh.log)
    # the server is gone: --offline answers from what the cache holds of it
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", gh.url, "--offline", "--dry-run", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["plans"][0]["install"] == "0.4.0-cpu"


def test_from_url_needs_a_digest(cli_home: Home, server: ReleaseServer) -> None:
    import hashlib

    name = releases.bundle_name("0.3.1")
    url = server.download_url(REPO, "v0.3.1", name)
    run = cli_home.superfluid("runtime", "install", "basert", "--from", url)
    assert run.code == 1 and "no SHA-256 to check it against" in run.stderr
    digest = hashlib.sha256(releases.bundle("0.3.1")).hexdigest()
    run = cli_home.superfluid("runtime", "install", "basert", "--from", url, "--sha256", digest)
    assert run.code == 0, run.stderr
    r = cli_home.receipt("0.3.1-cpu")
    assert (r["chosen_by"], r["sources"][0]["sha256"], r["abi"]) == ("from", digest, 1)
    run = cli_home.superfluid("runtime", "install", "basert", "--from", url, "--sha256", "0" * 64)
    assert run.code == 1 and "SHA-256" in run.stderr


def test_a_reinstall_from_the_cache_says_so_not_the_url_it_never_asks(cli_home: Home, server: ReleaseServer,
                                                                      tmp_path: object) -> None:
    """Issue 35, item 16: a --locked --reinstall against a mirror that is down succeeds from the
    download cache; it said "from http://127.0.0.1:9/..." as if the bytes came from there."""
    lock = f"{tmp_path}/superfluid.lock"
    assert cli_home.superfluid("lock", "--runtime", "basert", "--mirror", server.mirror_url, "-o", lock).code == 0
    first = cli_home.superfluid("runtime", "install", "--locked", lock, "--mirror", server.mirror_url)
    assert first.code == 0 and "  from http://" in first.stderr, first.stderr  # fetched: from the mirror
    assert [cli_home.receipt(i).get("mirror") for i in cli_home.installs()] == [server.mirror_url]
    down = "http://127.0.0.1:9/"
    again = cli_home.superfluid("runtime", "install", "--locked", lock, "--mirror", down, "--reinstall")
    assert again.code == 0, again.stderr
    assert f"superfluid:   from the download cache (as fetched before from {down}" in again.stderr
    assert f"superfluid:   from {down}" not in again.stderr
