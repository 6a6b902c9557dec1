"""The manifest index as a TUF repository, end to end (issue 21, "Done when"): ``superfluid-manifest
keys init``, ``export --tuf-keys``, ``refresh-timestamp`` and ``rotate-root`` write a real repository,
``python -m http.server`` serves it on loopback, and ``superfluid compat --service`` (the console
script, as a user runs it) follows it or refuses it: a rollback after a newer version was seen, an
expired timestamp, a tampered answer, no trust root; a rotated root is followed. Then the live
service signing its own index and re-signing its timestamp. (Each module's own rules, in process:
``test_tuf_keys.py``, ``test_tuf_repository.py``, ``test_tuf_live.py``, ``test_tuf_command.py``.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.manifest.minisign import generate
from tests import cli
from tests.conftest import ROOT
from tests.manifest.release_folders import base_document, vary, write_release
from tests.manifest.test_service import Served, serve


@pytest.fixture
def signed_releases(tmp_path: Path) -> tuple[Path, Path]:
    key = generate()
    pub = tmp_path / "release.pub"
    pub.write_text(key.public().to_text())
    root = tmp_path / "releases"
    doc = base_document()
    write_release(root, "r0.1.0", vary(doc, "0.1.0", builds=[("b11642", "v2")]), key)
    write_release(root, "r0.2.0", vary(doc, "0.2.0", abi=2, line=None, builds=[("b11669", "v2")]), key)
    return root, pub


@pytest.fixture
def tuf_env(tmp_path: Path) -> dict[str, str]:
    return cli.environment(tmp_path / "home", HOME=str(tmp_path))


def manifest(*args: str) -> cli.Run:
    done = cli.run("superfluid-manifest", *args)
    assert done.code == 0, done.stderr
    return done


def sf(tuf_env: dict[str, str], *args: str) -> cli.Run:
    done = cli.run("superfluid", "compat", *args, env=tuf_env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def www(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served by ``python -m http.server`` on loopback, and its URL."""
    top = tmp_path / "www"
    top.mkdir()
    proc = subprocess.Popen([cli.script("python"), "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                             "--directory", str(top)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    found = re.search(r"port (\d+)", proc.stdout.readline())
    assert found, "http.server did not say its port"
    try:
        yield top, f"http://127.0.0.1:{found[1]}/"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _versions(done: cli.Run) -> dict[str, object]:
    assert done.code == 0, done.stderr
    freshness: dict[str, object] = json.loads(done.stdout)["freshness"]
    return freshness


def _home_holds_only_trust(tuf_env: dict[str, str]) -> None:
    assert sorted(os.listdir(tuf_env["SUPERFLUID_HOME"])) == ["trust"]


def test_a_real_export_served_by_http_server(signed_releases: tuple[Path, Path], www: tuple[Path, str], tmp_path: Path,
                                             tuf_env: dict[str, str]) -> None:
    source, pub = signed_releases
    top, url = www
    keys, site = tmp_path / "keys", top / "site"
    manifest("keys", "init", str(keys))
    export = ["export", "--source", str(source), "--key", str(pub), "--tuf-keys", str(keys)]
    manifest(*export, str(site))
    root1 = tmp_path / "1.root.json"
    shutil.copy(site / "metadata" / "1.root.json", root1)
    shutil.copytree(site, tmp_path / "site-v1")
    manifest(*export, str(site))  # version 2 of the index
    service = url + "site/"
    ask = ["--service", service, "--runtime", "basert", "--abi", "2", "--json"]

    # no trust root and no --insecure-no-freshness: refused before anything is fetched
    done = sf(tuf_env, *ask)
    assert done.code == 2 and "--trust-root" in done.stderr and "--insecure-no-freshness" in done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "no-trust-root"

    assert _versions(sf(tuf_env, *ask, "--trust-root", str(root1))) == {
        "checked": True, "root": 1, "timestamp": 2, "snapshot": 2, "targets": 2,
        "expires": _versions(sf(tuf_env, *ask))["expires"]}  # the root given once is kept
    _home_holds_only_trust(tuf_env)

    # a client that saw version 2 refuses version 1, validly signed
    shutil.rmtree(site)
    shutil.copytree(tmp_path / "site-v1", site)
    done = sf(tuf_env, *ask)
    assert done.code == 1, done.stderr
    assert "index version 1 (timestamp) is older than version 2 seen on" in done.stderr and "rollback" in done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "rollback-refused"
    _home_holds_only_trust(tuf_env)

    # an expired timestamp is refused; the cron line re-signs it
    shutil.rmtree(site)
    shutil.copytree(tmp_path / "site-v1", site)
    for _ in range(2):
        manifest(*export, "--expires", "timestamp=2s", str(site))  # versions 2, then 3
    assert _versions(sf(tuf_env, *ask))["timestamp"] == 3
    time.sleep(2.5)
    done = sf(tuf_env, *ask)
    assert done.code == 1 and re.search(r"timestamp expired at \S+Z \(now \S+Z\): .*freeze", done.stderr), \
        done.stderr
    manifest("refresh-timestamp", "--tuf-keys", str(keys), str(site))
    assert _versions(sf(tuf_env, *ask))["timestamp"] == 4

    # a tampered answer is refused (one this client never fetched, so none is kept)
    answer = site / "v1" / "choose" / "basert" / "abi" / "1.json"
    answer.write_bytes(answer.read_bytes().replace(b"ABI 1", b"ABI 9", 1))
    done = sf(tuf_env, "--service", service, "--runtime", "basert", "--abi", "1")
    assert done.code == 1 and "answer v1/choose/basert/abi/1.json does not match its metadata" in done.stderr

    # a rotated root is followed: by this client, and by a new one given root 1 only
    new = tmp_path / "keys-2"
    manifest("keys", "init", str(new), "--root-keys", "2", "--root-threshold", "2")
    manifest("rotate-root", "--tuf-keys", str(keys), "--to", str(new), str(site))
    assert _versions(sf(tuf_env, *ask))["root"] == 2
    fresh = {**tuf_env, "SUPERFLUID_HOME": str(tmp_path / "fresh")}
    assert _versions(sf(fresh, *ask, "--trust-root", str(root1)))["root"] == 2
    manifest(*export[:-1], str(new), str(site))  # exports go on with the new keys
    assert _versions(sf(tuf_env, *ask))["targets"] == 5

    # and a static export read from the directory itself
    local = {**tuf_env, "SUPERFLUID_HOME": str(tmp_path / "local")}
    assert _versions(sf(local, "--service", str(site), "--runtime", "basert", "--abi", "2", "--json",
                        "--trust-root", str(root1)))["root"] == 2


def test_export_refuses_keys_its_root_does_not_trust(signed_releases: tuple[Path, Path], tmp_path: Path) -> None:
    source, pub = signed_releases
    for name in ("a", "b"):
        manifest("keys", "init", str(tmp_path / name))
    manifest("export", "--source", str(source), "--key", str(pub), "--tuf-keys", str(tmp_path / "a"),
             str(tmp_path / "site"))
    before = {p: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()}
    done = cli.run("superfluid-manifest", "export", "--source", source, "--key", pub, "--tuf-keys", tmp_path / "b",
                   tmp_path / "site")
    assert done.code == 2 and "the targets key in" in done.stderr and "rotate-root --to" in done.stderr
    assert {p: p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file()} == before


def test_the_live_service_signs_its_index_and_its_timestamp(signed_releases: tuple[Path, Path], tmp_path: Path,
                                                            tuf_env: dict[str, str]) -> None:
    source, pub = signed_releases
    keys, repo = tmp_path / "keys", tmp_path / "repo"
    manifest("keys", "init", str(keys))
    served: Served = serve(str(source), tuf_env, "--key", str(pub), "--tuf-repo", str(repo), "--tuf-keys", str(keys),
                           "--expires", "timestamp=3s")
    try:
        ask = ["--service", served.url, "--runtime", "basert", "--abi", "2", "--json",
               "--trust-root", str(repo / "metadata" / "1.root.json")]
        first = _versions(sf(tuf_env, *ask))
        time.sleep(3.5)  # past the timestamp's expiry: the service re-signs it when asked
        again = _versions(sf(tuf_env, *ask))
        assert again["timestamp"] > first["timestamp"] and again["targets"] == first["targets"]  # type: ignore[operator]
        write_release(source, "r0.3.0", vary(base_document(), "0.3.0", abi=2, line=None), generate())
        time.sleep(1.5)  # past the directory's TTL: the new (rejected) release is a new index, signed
        assert _versions(sf(tuf_env, *ask))["targets"] == int(first["targets"]) + 1  # type: ignore[call-overload]
    finally:
        assert served.stop() == 0
    # restarted on the same port, nothing changed: the same versions (a restart is never a rollback)
    port = served.url.rsplit(":", 1)[1]
    served = serve(str(source), tuf_env, "--key", str(pub), "--tuf-repo", str(repo), "--tuf-keys", str(keys),
                   "--port", port)
    try:
        assert _versions(sf(tuf_env, *ask))["targets"] == int(first["targets"]) + 1  # type: ignore[call-overload]
    finally:
        assert served.stop() == 0


def _doc_lines(section: str) -> list[list[str]]:
    """The ``$ ...`` command lines of the first code block under ``section`` of docs/manifest-service.md."""
    text = (ROOT / "docs" / "manifest-service.md").read_text()
    block = text[text.index(f"## {section}"):].split("```")[1]
    return [shlex.split(line[2:].split("#")[0]) for line in block.splitlines() if line.startswith("$ ")]


def test_the_client_example_of_the_docs_works_against_the_service_it_shows(
        signed_releases: tuple[Path, Path], tmp_path: Path, tuf_env: dict[str, str]) -> None:
    """Issue 35, item 6: "Asking from the command line", pasted as it reads (its paths made ours): the
    service it shows publishes TUF metadata, and the client trusts the root the page names."""
    source, pub = signed_releases
    places = {"/secure/tuf-keys": str(tmp_path / "keys"), "./releases": str(source), "release.pub": str(pub),
              "./tuf": str(tmp_path / "tuf")}

    def ours(word: str) -> str:
        for theirs, mine in places.items():
            if word == theirs or word.startswith(theirs + "/"):
                return mine + word[len(theirs):]
        return word

    init, serve_line, ask = ([ours(w) for w in line] for line in _doc_lines("Asking from the command line"))
    assert init[:3] == ["superfluid-manifest", "keys", "init"] and serve_line[:2] == ["superfluid-manifest", "serve"]
    assert ask[:3] == ["superfluid", "compat", "--service"]
    manifest(*init[1:])
    flags = serve_line[2:]
    at = flags.index("--source")
    served: Served = serve(flags[at + 1], tuf_env, *flags[:at], *flags[at + 2:])
    try:
        ask[3] = served.url
        done = sf(tuf_env, *ask[2:])
        assert done.code == 0, done.stderr
        assert done.stdout.startswith(f"releases that drive basert ABI 2, newest first ({served.url}/):")
        assert "0.2.0" in done.stdout
    finally:
        assert served.stop() == 0


def test_a_service_without_tuf_metadata_is_refused_naming_how_to_serve_it(
        signed_releases: tuple[Path, Path], tmp_path: Path, tuf_env: dict[str, str]) -> None:
    """The plain ``serve --source --key`` the page shows first publishes no metadata: the refusal says how
    to serve it with metadata, as the page does."""
    source, pub = signed_releases
    manifest("keys", "init", str(tmp_path / "keys"))
    manifest("export", "--source", str(source), "--key", str(pub), "--tuf-keys", str(tmp_path / "keys"),
             str(tmp_path / "site"))
    served: Served = serve(str(source), tuf_env, "--key", str(pub))
    try:
        done = sf(tuf_env, "--service", served.url, "--runtime", "basert", "--abi", "2", "--json",
                  "--trust-root", str(tmp_path / "site" / "metadata" / "1.root.json"))
    finally:
        assert served.stop() == 0
    assert done.code == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "no-freshness" and "publishes no TUF metadata" in error["message"]
    assert "serves with --tuf-repo DIR --tuf-keys KEYS" in error["advice"]
