"""``--for FILE|URL|VERSION``: install for the superfluid release that will run the engine, chosen by
that release's compat.json (issue 16), against the loopback release server."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest import minisign
from tests import cli
from tests.end_to_end.conftest import Home
from tests.end_to_end.releases import libllama_archive
from tests.release_server import ReleaseServer


def _ours() -> dict[str, Any]:
    done = cli.run("superfluid", "compat", "--json", timeout=60)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _document(tmp: Path, key: minisign.SecretKey | None, *, abi: int = 2, builds: tuple[str, ...] = ("b11549",),
              version: str = "0.9.0") -> Path:
    """Superfluid ``version``'s compat.json (driving basert ``abi`` and llama.cpp ``builds``, v2), signed
    with ``key`` unless None; its public key beside it as ``minisign.pub``."""
    doc = copy.deepcopy(_ours())
    doc["release"] = {"name": "superfluid", "version": version}
    doc["runtimes"]["basert"]["requires"] = {"header": f"{version}", "abi": abi}
    doc["runtimes"]["basert"]["unnumbered_line"] = None
    doc["runtimes"]["basert"]["installs"] = []
    doc["runtimes"]["llamacpp"]["tested"] = [{"build": b, "layout": "v2"} for b in builds]
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"superfluid-{version}.compat.json"
    body = (json.dumps(doc, indent=2) + "\n").encode()
    path.write_bytes(body)
    if key is not None:
        sig = minisign.sign(body, key, trusted_comment=f"superfluid {version}")
        (tmp / (path.name + ".minisig")).write_text(sig.to_text())
        (tmp / "minisign.pub").write_text(key.public().to_text())
    return path


def _install(home: Home, server: ReleaseServer, *flags: str):  # type: ignore[no-untyped-def]
    return home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, *flags)


def test_an_abi_2_release_installs_by_number_for_a_document_stating_abi_2(
        cli_home: Home, server: ReleaseServer, tmp_path: Path, key: minisign.SecretKey) -> None:
    doc = _document(tmp_path / "doc", key)
    pub = str(tmp_path / "doc" / "minisign.pub")
    plans = _install(cli_home, server, "--for", str(doc), "--key", pub, "--dry-run", "--json")
    assert plans.code == 0, plans.stderr
    first = plans.json()["plans"][0]
    assert (first["version"], first["abi"], first["chosen_by"], first["tested"]) == ("0.5.0", 2, "abi", True)
    run = _install(cli_home, server, "--for", str(doc), "--key", pub)
    assert run.code == 0, run.stderr
    receipt = cli_home.receipt("0.5.0-" + first["backend"])
    digest = __import__("hashlib").sha256(doc.read_bytes()).hexdigest()
    assert receipt["for"] == {"release": "superfluid", "version": "0.9.0", "compat_sha256": digest}
    assert (receipt["tested"], receipt["abi"], receipt["chosen_by"]) == (True, 2, "abi")
    # listed for the release it serves, not judged by our ABI
    row = next(r for r in cli_home.superfluid("runtimes", "--json").json() if r["id"] == "basert")
    assert (row["state"], row["abi"], row["for"]["version"]) == ("ready", 2, "0.9.0"), row
    # our own document, the same listing: the ABI-1 release
    ours = _install(cli_home, server, "--dry-run", "--json").json()["plans"][0]
    assert (ours["version"], ours["abi"], "for" in ours) == ("0.4.0", 1, False)
    # versions --for judges the recipe's pins by that release's ABI: 0.4.0 (ABI 1) is not driven by it
    rows = {r["version"]: r for r in cli_home.superfluid("runtime", "versions", "basert", "--for", str(doc), "--key",
                                                         pub, "--json").json()}
    assert rows["0.4.0"]["tested"] is False and "ABI 1; this superfluid drives ABI 2" in rows["0.4.0"]["verdict"]


@pytest.mark.parametrize("case", ["tampered", "unsigned-required", "untrusted-key", "malformed"])
def test_a_document_that_is_not_believed_is_refused_and_nothing_is_written(
        cli_home: Home, server: ReleaseServer, tmp_path: Path, key: minisign.SecretKey, case: str) -> None:
    doc = _document(tmp_path / "doc", None if case == "unsigned-required" else key)
    flags = ["--for", str(doc)]
    if case != "untrusted-key":
        flags += ["--key", str(tmp_path / "doc" / "minisign.pub")] if case != "unsigned-required" else []
    if case == "tampered":
        doc.write_bytes(doc.read_bytes().replace(b'"abi": 2', b'"abi": 1'))
    if case == "unsigned-required":
        flags.append("--require-signature")
    if case == "malformed":
        text = json.loads(doc.read_text())
        text["runtimes"]["basert"]["requires"]["abi"] = "two"
        body = (json.dumps(text) + "\n").encode()
        doc.write_bytes(body)
        (tmp_path / "doc" / (doc.name + ".minisig")).write_text(
            minisign.sign(body, key, trusted_comment="malformed").to_text())
    run = _install(cli_home, server, *flags)
    assert run.code == 1 and "Traceback" not in run.stderr, run.stderr
    expect = {"tampered": "does not verify", "unsigned-required": "unsigned", "untrusted-key": "trust",
              "malformed": "abi"}[case]
    assert expect in run.stderr.lower(), run.stderr
    assert cli_home.installs() == []


def test_for_version_through_the_github_releases(cli_home: Home, server: ReleaseServer, tmp_path: Path,
                                                 key: minisign.SecretKey) -> None:
    doc = _document(tmp_path / "doc", key, version="0.9.0")
    server.add_release("superfluid/superfluid-toolchain", "v0.9.0", {
        doc.name: doc.read_bytes(), doc.name + ".minisig": (tmp_path / "doc" / (doc.name + ".minisig")).read_bytes()})
    cli_home.env["SUPERFLUID_GITHUB_API"] = server.url
    cli_home.env["SUPERFLUID_FOR"] = "0.9.0"
    run = _install(cli_home, server, "--key", str(tmp_path / "doc" / "minisign.pub"), "--dry-run", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["plans"][0]["version"] == "0.5.0"
    assert run.json()["plans"][0]["for"]["version"] == "0.9.0"


def test_llamacpp_for_a_release_testing_only_b11549_installs_b11549(
        cli_home: Home, tmp_path: Path, key: minisign.SecretKey, libllama_v2: Path) -> None:
    data = libllama_archive(libllama_v2)
    doc = _document(tmp_path / "doc", key, builds=("b11549",))
    cli_home.env["SUPERFLUID_HOST_VULKAN"] = "0"
    with ReleaseServer() as s:
        s.add_release("ggml-org/llama.cpp", "b11549", {"llama-b11549-bin-ubuntu-x64.tar.gz": data})
        s.add_release("ggml-org/llama.cpp", "b11642", {"llama-b11642-bin-ubuntu-x64.tar.gz": data})
        run = cli_home.superfluid("runtime", "install", "llamacpp", "--mirror", s.mirror_url, "--for", str(doc),
                                  "--key", str(tmp_path / "doc" / "minisign.pub"), "--json")
    assert run.code == 0, run.stderr
    out = run.json()
    assert [p["version"] for p in out["plans"]] == ["b11549"]
    receipt = json.loads((cli_home.path / "runtimes" / "llamacpp" / "b11549-cpu" / "runtime.json").read_text())
    assert (receipt["tested"], receipt["chosen_by"], receipt["layout"]) == (True, "tested", "v2")
    assert receipt["for"]["version"] == "0.9.0"
    assert not (cli_home.path / "runtimes" / "llamacpp" / "b11642-cpu").exists()


def test_lock_for_a_document_locks_what_that_release_drives(cli_home: Home, server: ReleaseServer, tmp_path: Path,
                                                           key: minisign.SecretKey) -> None:
    import tomllib

    doc = _document(tmp_path / "doc", key)
    out = tmp_path / "superfluid.lock"
    run = cli_home.superfluid("lock", "--runtime", "basert", "--platform", "linux-x64", "--mirror", server.mirror_url,
                              "--for", str(doc), "--key", str(tmp_path / "doc" / "minisign.pub"), "-o", str(out))
    assert run.code == 0, run.stderr
    engines = tomllib.loads(out.read_text())["engine"]
    assert [(e["runtime"], e["version"]) for e in engines] == [("basert", "0.5.0")]
    ours = tmp_path / "ours.lock"
    run = cli_home.superfluid("lock", "--runtime", "basert", "--platform", "linux-x64", "--mirror", server.mirror_url,
                              "-o", str(ours))
    assert run.code == 0, run.stderr
    assert [e["version"] for e in tomllib.loads(ours.read_text())["engine"]] == ["0.4.0"]


@pytest.mark.parametrize("tuf", [False, True], ids=["unchecked", "tuf"])
def test_for_version_through_a_running_manifest_service(cli_home: Home, server: ReleaseServer, tmp_path: Path,
                                                       key: minisign.SecretKey, tuf: bool) -> None:
    """Unchecked (``--insecure-no-freshness``), and through the service's own TUF metadata: it signs
    its index with the online keys (``--tuf-repo``, ``--tuf-keys``), the client trusts its root."""
    import signal

    from tests.manifest.release_folders import base_document, vary, write_release

    root = tmp_path / "releases"
    write_release(root, "0.9.0", vary(base_document(), "0.9.0", abi=2, line=None), key)
    write_release(root, "0.8.0", vary(base_document(), "0.8.0"), key)
    pub = tmp_path / "release.pub"
    pub.write_text(key.public().to_text())
    signing: list[str] = []
    trust = ["--insecure-no-freshness"]
    if tuf:
        keys, repo = tmp_path / "tuf-keys", tmp_path / "tuf-repo"
        made = cli.run("superfluid-manifest", "keys", "init", keys, timeout=60)
        assert made.code == 0, made.stderr
        signing, trust = ["--tuf-repo", str(repo), "--tuf-keys", str(keys)], []
        cli_home.env["SUPERFLUID_MANIFEST_ROOT"] = str(repo / "metadata" / "1.root.json")
    proc = cli.start("superfluid-manifest", "serve", "--source", root, "--port", "0", "--quiet", "--key", pub, *signing,
                     env=cli_home.env, stdout=subprocess.DEVNULL)
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        while not lines or ("serving on " not in lines[-1] and lines[-1] and len(lines) < 10):
            lines.append(proc.stderr.readline())  # its summary, then where it serves
        line = lines[-1]
        assert "serving on " in line, lines
        cli_home.env["SUPERFLUID_MANIFEST_URL"] = line.split("serving on ", 1)[1].split()[0]
        for version, expect in (("0.9.0", "0.5.0"), ("0.8.0", "0.4.0")):
            run = _install(cli_home, server, "--for", version, "--key", str(pub), "--dry-run", "--json", *trust)
            assert run.code == 0, run.stderr
            first = run.json()["plans"][0]
            assert (first["version"], first["for"]["version"]) == (expect, version)
        missing = _install(cli_home, server, "--for", "0.7.0", "--key", str(pub), "--dry-run", *trust)
        assert missing.code == 1 and "no verified release 0.7.0 (verified: 0.9.0, 0.8.0)" in missing.stderr
        assert "HTTP 404" not in missing.stderr  # the service's reason, not only its status
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
