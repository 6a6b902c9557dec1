"""A fleet from an OCI registry (issue 23), against a real ``docker-registry`` on loopback: one
machine locks against the loopback GitHub fake and pushes the lock's files to the registry; twenty
machines install ``--locked --mirror oci://...`` at once, each byte the blob of its locked digest,
verified by us; the release server sees no request from them; a second push sends no blob; a
flipped blob in the registry's storage is refused with nothing installed, and so is a listing, a
``.sha256`` file or an ABI asset replaced there with other bytes (issue 37); basic auth from a docker
config works and its password is in no file of a home and no output."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import urllib.request
from pathlib import Path

import pytest

from superfluid.installer.fleet import lockfile
from superfluid.installer.sources.oci.ref import INDEX_TYPE, MANIFEST_TYPE, TITLE
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests.conftest import ROOT, Run
from tests.fleet.conftest import Machine, machine_at
from tests.fleet.registry import PASSWORD, REPOSITORY, USER, Registry, docker_config
from tests.release_server import ReleaseServer

NODES = 20


def _lock(admin: Machine, *runtimes: str) -> lockfile.Lock:
    argv = ["lock", *(a for r in runtimes for a in ("--runtime", r)), "--platform", "linux-x64", "--backend", "cpu"]
    run = admin.superfluid(*argv)
    assert run.code == 0, run.stderr
    return lockfile.read(admin.cwd / "superfluid.lock")[0]


def _push(admin: Machine, registry: Registry, *extra: str) -> Run:
    run = admin.superfluid("mirror", "push", registry.url, *extra)
    assert run.code == 0, (run.stdout, run.stderr)
    return run


def test_push_then_twenty_machines_install_locked_from_the_registry(tmp_path: Path, admin: Machine,
                                                                      fleet_server: ReleaseServer,
                                                                      registry: Registry) -> None:
    lock = _lock(admin, "basert")
    digest = lockfile.read(admin.cwd / "superfluid.lock")[1]
    pushed = _push(admin, registry, "--json")
    doc = pushed.json()
    assert schema_errors(doc, "mirror-push") == []
    assert doc["tags"] == ["basert-0.4.0-linux-x64-cpu"] and doc["indexes"] == ["releases.basecompute.baseRT"]
    files = {f.sha256 for e in lock.engines for f in e.files()}
    assert doc["blobs"]["sent"] == len(files) + 2  # the lock's files, the listing, the empty config
    assert set(registry.tags()) == {"basert-0.4.0-linux-x64-cpu", "releases.basecompute.baseRT"}

    # a second push sends no blob and no manifest: it only asks
    fleet_server.clear_log()
    registry.clear_log()
    again = _push(admin, registry)
    assert "0 blobs sent" in again.stdout and "0 manifests written" in again.stdout, again.stdout
    assert {a.method for a in registry.log()} <= {"HEAD", "GET"} and fleet_server.log == []

    nodes = [machine_at(tmp_path, f"node{i}") for i in range(NODES)]
    for node in nodes:
        shutil.copy(admin.cwd / "superfluid.lock", node.cwd / "superfluid.lock")
    fleet_server.clear_log()
    registry.clear_log()
    procs = [node.popen("runtime", "install", "--locked", "--mirror", registry.url) for node in nodes]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * NODES, outs
    assert fleet_server.log == []  # not one request reached the release fleet_server
    gets = [a for a in registry.log() if a.method == "GET"]
    # each asset's Sigstore bundle asked as a referrer of its own manifest: the referrers API (none in
    # docker-registry 2.8), then the referrers tag; none was pushed (the release attests nothing)
    asked = [a for a in gets if "/referrers/sha256:" in a.path or "/manifests/sha256-" in a.path]
    assert len(asked) == 2 * NODES * len(lock.engines[0].assets) and {a.status for a in asked} == {404}
    blobs = [a for a in gets if a not in asked]
    assert all("/blobs/sha256:" in a.path and a.status == 200 for a in blobs)  # by digest; no listing, no index
    assert len(blobs) == NODES * len(lock.engines[0].assets)

    bundle = lock.engines[0].assets[0]
    for node in nodes:
        assert node.installs("basert") == ["0.4.0-cpu"]
        receipt = node.receipt("basert", "0.4.0-cpu")
        assert receipt["lock"]["sha256"] == digest and schema_errors(receipt, "runtime") == []
        assert receipt["sources"] == [{"url": f"{registry.url}/{bundle.path}", "sha256": bundle.sha256}]
    rows = [node.popen("runtimes", "--json") for node in nodes]
    for p in rows:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        row = next(r for r in json.loads(out) if r["id"] == "basert")
        assert row["state"] == "ready" and row["lock"]["sha256"] == digest, row


def test_a_flipped_blob_in_the_registry_is_refused_and_nothing_installed(tmp_path: Path, admin: Machine,
                                                                         registry: Registry) -> None:
    lock = _lock(admin, "basert")
    _push(admin, registry)
    bundle = lock.engines[0].assets[0]
    stored = registry.blob_file(bundle.sha256)
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0x01
    stored.write_bytes(bytes(data))  # the registry serves it as it is: it checks digests on upload only

    node = machine_at(tmp_path, "node")
    shutil.copy(admin.cwd / "superfluid.lock", node.cwd / "superfluid.lock")
    for argv in (["runtime", "install", "--locked", "--mirror", registry.url],
                 ["runtime", "install", "basert", "--mirror", registry.url]):
        run = node.superfluid(*argv)
        assert run.code == 1, run.stderr
        assert bundle.sha256 in run.stderr and "Traceback" not in run.stderr
        assert "expected" in run.stderr and "nothing was installed" in run.stderr, run.stderr
        assert node.installs("basert") == []
        cached = node.home / "cache" / "sha256"
        assert not (cached / bundle.sha256).exists()


def test_a_plain_install_lock_update_and_repair_read_the_registry(tmp_path: Path, admin: Machine,
                                                                      fleet_server: ReleaseServer,
                                                                      registry: Registry) -> None:
    _lock(admin, "basert", "llamacpp")
    _push(admin, registry)
    fleet_server.clear_log()
    node = machine_at(tmp_path, "node", SUPERFLUID_MIRROR=registry.url)
    run = node.superfluid("runtime", "install", "basert")  # the listing the push wrote, then blobs
    assert run.code == 0, run.stderr
    assert node.installs("basert") == ["0.4.0-cpu"]
    assert node.receipt("basert", "0.4.0-cpu")["abi"] == 1
    run = node.superfluid("runtime", "update", "basert")
    assert run.code == 0 and "nothing newer installs here" in run.stdout, run.stderr
    lib = node.home / "runtimes" / "basert" / "0.4.0-cpu" / "lib"
    shutil.rmtree(lib)
    run = node.superfluid("runtime", "repair", "basert")
    assert run.code == 0, run.stderr
    assert lib.is_dir()

    # a lock written from the registry names it, and installs from it with no --mirror
    run = node.superfluid("lock", "--runtime", "basert", "--runtime", "llamacpp", "--platform", "linux-x64",
                          "--backend", "cpu")
    assert run.code == 0, run.stderr
    lock = lockfile.read(node.cwd / "superfluid.lock")[0]
    assert all(f.url.startswith(registry.url + "/") for e in lock.engines for f in e.files())
    other = machine_at(tmp_path, "other")
    shutil.copy(node.cwd / "superfluid.lock", other.cwd / "superfluid.lock")
    run = other.superfluid("runtime", "install", "--locked")
    assert run.code == 0, run.stderr
    assert other.installs("basert") == ["0.4.0-cpu"] and other.installs("llamacpp") == ["b11642-cpu"]
    assert fleet_server.log == []


def _everything(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.is_symlink())


def test_basic_auth_from_a_docker_config(tmp_path: Path, admin: Machine, fleet_server: ReleaseServer) -> None:
    with Registry(tmp_path / "registry", auth=True) as registry:
        _lock(admin, "basert")
        # no login: refused, naming the fix
        run = admin.superfluid("mirror", "push", registry.url)
        assert run.code == 1 and "asks for a login" in run.stderr and f"docker login {registry.host}" in run.stderr
        # a wrong one: refused, naming where it came from
        docker_config(admin.cwd, registry.host, password="wrong")
        admin.env["HOME"] = str(admin.cwd)
        run = admin.superfluid("mirror", "push", registry.url)
        assert run.code == 1 and "refused the login of 'fleet'" in run.stderr, run.stderr
        docker_config(admin.cwd, registry.host)
        pushed = _push(admin, registry)

        node = machine_at(tmp_path, "node")
        shutil.copy(admin.cwd / "superfluid.lock", node.cwd / "superfluid.lock")
        # the variable names a file that is not there: said so, not "no login for the host" (issue 35, item 14)
        node.env["REGISTRY_AUTH_FILE"] = str(tmp_path / "missing.json")
        run = node.superfluid("runtime", "install", "basert", "--mirror", registry.url, "--json")
        assert run.code == 1 and node.installs("basert") == [], run.stderr
        error = run.json()["error"]
        assert f"REGISTRY_AUTH_FILE names {tmp_path / 'missing.json'}, which does not exist" in error["message"]
        assert "point REGISTRY_AUTH_FILE at an existing auth file" in error["advice"] and "fix" not in error
        auth = docker_config(tmp_path / "elsewhere", registry.host)
        node.env["REGISTRY_AUTH_FILE"] = str(auth)
        runs = [node.superfluid("runtime", "install", "--locked", "--mirror", registry.url),
                node.superfluid("runtime", "install", "basert", "--mirror", registry.url, "--json")]
        assert [r.code for r in runs] == [0, 0], [r.stderr for r in runs]
        assert node.installs("basert") == ["0.4.0-cpu"]
        assert any(a.status == 401 for a in registry.log())  # it was asked for, and answered

    secret = PASSWORD.encode()
    encoded = base64.b64encode(f"{USER}:{PASSWORD}".encode())
    for home in (node.home, admin.home):
        everything = _everything(home)
        assert secret not in everything and encoded not in everything
    for run in (pushed, *runs):
        assert PASSWORD not in run.stdout + run.stderr and encoded.decode() not in run.stdout + run.stderr


def _index(registry: Registry) -> dict[str, str]:
    """The files the registry's index of baseRT names: mirror path -> SHA-256."""
    req = urllib.request.Request(f"http://{registry.host}/v2/{REPOSITORY}/manifests/releases.basecompute.baseRT",
                                 headers={"Accept": MANIFEST_TYPE})
    with urllib.request.urlopen(req, timeout=10) as r:
        doc = json.loads(r.read())
    return {layer["annotations"][TITLE]: layer["digest"].removeprefix("sha256:") for layer in doc["layers"]}


def test_the_releases_tag_is_an_image_manifest_as_the_docs_say(admin: Machine, registry: Registry) -> None:
    """Issue 35, item 7: ``releases.<owner>.<repo>`` is an image manifest of our artifact type (what
    oras and skopeo read as one), not an ``image.index``; docs/fleet.md and docs/cli.md say so."""
    _lock(admin, "basert")
    _push(admin, registry)
    req = urllib.request.Request(f"http://{registry.host}/v2/{REPOSITORY}/manifests/releases.basecompute.baseRT",
                                 headers={"Accept": f"{MANIFEST_TYPE}, application/vnd.oci.image.index.v1+json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        doc = json.loads(r.read())
    assert (doc["mediaType"], doc["artifactType"]) == (MANIFEST_TYPE, INDEX_TYPE) and "manifests" not in doc
    row = next(line for line in (ROOT / "docs" / "fleet.md").read_text().splitlines()
               if line.startswith("| `releases.<owner>.<repo>`"))
    assert "an image manifest" in row and INDEX_TYPE in row and "the index of" not in row
    cli = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert "per repository an index tagged" not in cli
    assert f"not an OCI `image.index`: `artifactType` `{INDEX_TYPE}`" in cli


def _other_bytes(title: str, data: bytes) -> bytes:
    """Bytes that say the same as ``data`` (read unchecked, the install would go on as if nothing
    were wrong), and are not ``data``: only the digest tells them apart."""
    if title.endswith("releases.json"):
        return (json.dumps(json.loads(data), indent=2) + "\n").encode()
    return data.replace(b"\n", b"\r\n") if b"\n" in data else data + b"\n"


@pytest.mark.parametrize("which", ["releases.json", ".sha256", "-abi-"], ids=["listing", "sha256-file", "abi-asset"])
def test_a_blob_of_other_bytes_in_the_registry_is_refused_naming_it(tmp_path: Path, admin: Machine,
                                                                    registry: Registry, which: str) -> None:
    """Issue 37: the registry serves what its storage holds; every blob it answers is hashed as it
    arrives and refused unless it is the digest the manifest names, before anything reads it."""
    _lock(admin, "basert")
    _push(admin, registry)
    title, sha = next((t, s) for t, s in _index(registry).items() if which in t)
    stored = registry.blob_file(sha)
    other = _other_bytes(title, stored.read_bytes())
    stored.write_bytes(other)
    got = hashlib.sha256(other).hexdigest()

    node = machine_at(tmp_path, "node")
    run = node.superfluid("runtime", "install", "basert", "--mirror", registry.url)
    assert run.code == 1, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    for named in (title.rsplit("/", 1)[-1], sha, got, registry.host, "nothing was installed"):
        assert named in run.stderr, (named, run.stderr)
    assert node.installs("basert") == []
    cache = node.home / "cache"
    kept = [p for p in cache.rglob("*") if p.is_file() and not p.is_symlink()] if cache.is_dir() else []
    assert not any(p.name == got for p in kept) and not any(p.read_bytes() == other for p in kept)


@pytest.mark.parametrize(("flag", "env", "scheme"), [
    ((), {}, "https"),
    (("--plain-http",), {}, "http"),
    ((), {"SUPERFLUID_OCI_PLAIN_HTTP": "1"}, "http"),
], ids=["https", "flag", "variable"])
def test_plain_http_reaches_the_registry_client_as_a_setting(admin: Machine, flag: tuple[str, ...],
                                                              env: dict[str, str], scheme: str) -> None:
    """``--plain-http`` (or ``SUPERFLUID_OCI_PLAIN_HTTP=1``, read by the face) is handed down in the
    fetch configuration: the registry's first request is ``http://`` for push, install and lock."""
    _lock(admin, "basert")
    admin.env.update(env)
    where = "oci://registry.invalid/fleet/engines"
    for argv in (["mirror", "push", where, *flag],
                 ["runtime", "install", "basert", "--mirror", where, *flag],
                 ["lock", "--runtime", "basert", "--platform", "linux-x64", "--mirror", where, "-o", "other.lock",
                  *flag]):
        run = admin.superfluid(*argv)
        assert run.code == 1 and "Traceback" not in run.stderr, (argv, run.stderr)
        assert f"{scheme}://registry.invalid/v2/fleet/engines/" in run.stderr, (argv, run.stderr)
