"""``superfluid attestation verify`` through the real CLI (issue 46, item 7): exit 0 with the identity
proven (text and JSON), exit 1 with the reason for each hostile bundle, exit 2 for a bad flag or a path
that is not a file; a bundle GitHub Actions made under the public Sigstore verifies with the production
root, offline, and is refused for other bytes or another repository."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.cli import Run
from tests.installer.trust import public_bundle as public
from tests.installer.trust.sigstore_simulator import Claims, SigstoreSimulator, write_bundle

ASSET = b"llama-b6000-bin-ubuntu-x64.zip's bytes\n" * 64
IDENTITY = ["--repo", "ggml-org/llama.cpp", "--workflow", "release.yml", "--ref", "refs/tags/*"]


@pytest.fixture
def place(tmp_path: Path, sigstore: SigstoreSimulator) -> Path:
    """A folder with the asset and this Sigstore's trusted root (``trusted_root.json``)."""
    (tmp_path / "asset.zip").write_bytes(ASSET)
    sigstore.write_root(tmp_path / "trusted_root.json")
    return tmp_path


def attest(place: Path, *argv: str | Path, bundle: dict[str, Any] | None = None, root: bool = True,
           **env: str) -> Run:
    """``superfluid attestation verify asset.zip --bundle asset.zip.sigstore.json ARGV`` in ``place``."""
    if bundle is not None:
        write_bundle(place / "asset.zip.sigstore.json", bundle)
    where = ["--trust-root", str(place / "trusted_root.json")] if root else []
    return cli.run("superfluid", "attestation", "verify", *argv, *where,
                   env=cli.environment(place / "home", **env), cwd=place, timeout=60)


def test_an_attested_asset_is_verified_and_who_built_it_is_said(place: Path, sigstore: SigstoreSimulator) -> None:
    run = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", *IDENTITY, bundle=sigstore.sign(ASSET))
    assert run.code == 0, run.stderr
    first, *rows = run.stdout.splitlines()
    assert first == ("asset.zip: verified: built by "
                     "https://github.com/ggml-org/llama.cpp/.github/workflows/release.yml@refs/tags/b6000")
    facts = {row[:14].strip(): row[14:] for row in rows}  # "  repository  ggml-org/llama.cpp"
    assert (facts["repository"], facts["workflow"], facts["ref"], facts["commit"]) == (
        "ggml-org/llama.cpp", ".github/workflows/release.yml", "refs/tags/b6000", Claims().commit)
    assert facts["statement"] == "https://slsa.dev/provenance/v1" and facts["run"].endswith("/runs/424242/attempts/1")
    assert facts["log entry"].split(" at ")[0].isdigit() and facts["bundle"].startswith("sha256:")


def test_json_carries_what_was_asked_and_proven(place: Path, sigstore: SigstoreSimulator) -> None:
    run = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", "--repo", "ggml-org/llama.cpp", "--json",
                 bundle=sigstore.sign(ASSET, dsse=False))
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "attestation-verify") == []
    assert doc["wanted"] == {"repository": "ggml-org/llama.cpp", "workflow": None, "ref": None}
    assert (doc["provenance"]["kind"], doc["provenance"]["predicate_type"]) == ("message-signature", None)
    assert doc["trust_root"] == str(place / "trusted_root.json") and doc["file"] == "asset.zip"


def test_the_variable_names_the_trusted_root_as_the_flag_does(place: Path, sigstore: SigstoreSimulator) -> None:
    run = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", *IDENTITY, bundle=sigstore.sign(ASSET),
                 root=False, SUPERFLUID_SIGSTORE_ROOT=str(place / "trusted_root.json"))
    assert run.code == 0, run.stderr
    without = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", *IDENTITY, root=False)
    assert without.code == 1 and "does not chain to a CA of the trusted root" in without.stderr  # the public root's


def _tamper_proof(bundle: dict[str, Any]) -> dict[str, Any]:
    proof = bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    first = base64.b64decode(proof["hashes"][-1])
    proof["hashes"][-1] = base64.b64encode(bytes([first[0] ^ 0x80]) + first[1:]).decode()
    return bundle


#: (bundle, extra flags, words of the refusal): each refused, exit 1, through the real CLI
REFUSED = [
    pytest.param(lambda s: s.sign(ASSET, Claims(repository="evil/llama.cpp")), [],
                 "was signed by a workflow of evil/llama.cpp, not of ggml-org/llama.cpp", id="another-repository"),
    pytest.param(lambda s: s.sign(ASSET, Claims(workflow=".github/workflows/nightly.yml")), [],
                 "was signed by the workflow .github/workflows/nightly.yml of ggml-org/llama.cpp, not "
                 ".github/workflows/release.yml", id="another-workflow"),
    pytest.param(lambda s: s.sign(ASSET, Claims(ref="refs/heads/master")), [],
                 "was built from refs/heads/master, not refs/tags/*", id="a-branch-where-a-tag-is-asked"),
    pytest.param(lambda s: s.sign(b"other bytes"), [], "is for other bytes than asset.zip", id="other-bytes"),
    pytest.param(lambda s: s.sign(b"other bytes", dsse=False), [], "it signs other bytes than asset.zip",
                 id="other-bytes-message-signature"),
    pytest.param(lambda s: _tamper_proof(s.sign(ASSET)), [], "its transparency log entry does not verify",
                 id="tampered-inclusion-proof"),
    pytest.param(lambda s: s.sign(ASSET, promise=False), [], "no trusted time", id="no-log-time"),
    pytest.param(lambda s: SigstoreSimulator(name="untrusted").sign(ASSET), [],
                 "does not chain to a CA of the trusted root", id="a-root-not-trusted"),
]


@pytest.mark.parametrize(("make", "flags", "words"), REFUSED)
def test_each_hostile_bundle_is_refused_with_its_reason(place: Path, sigstore: SigstoreSimulator, make: Any,
                                                         flags: list[str], words: str) -> None:
    run = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", *IDENTITY, *flags, bundle=make(sigstore))
    assert run.code == 1, run.stderr
    assert run.stderr.startswith("superfluid: asset.zip.sigstore.json: ") and words in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


def test_a_certificate_outside_its_validity_is_refused(place: Path, sigstore: SigstoreSimulator) -> None:
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc)
    run = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", *IDENTITY, "--json",
                 bundle=sigstore.sign(ASSET, signed_at=now - datetime.timedelta(hours=3),
                                 integrated=now - datetime.timedelta(hours=2)))
    assert run.code == 1
    error = run.json()["error"]
    assert (error["code"], error["exit"]) == ("provenance-refused", 1)
    assert "its certificate does not chain to a CA of the trusted root at the time the log signed" in error["message"]
    assert "cert is not valid at validation time" in error["message"]


def test_a_100_mb_or_deeply_nested_bundle_is_refused_unread(place: Path) -> None:
    huge = place / "huge.sigstore.json"
    with open(huge, "wb") as f:
        f.truncate(100 << 20)
    run = attest(place, "asset.zip", "--bundle", huge, *IDENTITY)
    assert run.code == 1 and f"{huge}: cannot be read as a Sigstore bundle: it is larger than" in run.stderr
    nested = place / "nested.sigstore.json"
    nested.write_text("[" * 50000 + "]" * 50000)
    run = attest(place, "asset.zip", "--bundle", nested, *IDENTITY)
    assert run.code == 1 and "is not a Sigstore bundle: it is nested too deeply" in run.stderr, run.stderr


@pytest.mark.parametrize(("argv", "words"), [
    pytest.param(["asset.zip", "--bundle", "fifo"], "--bundle fifo is a FIFO, not a Sigstore bundle", id="fifo"),
    pytest.param(["missing.zip", "--bundle", "b.json"], "missing.zip: no such file or directory", id="no-file"),
    pytest.param(["asset.zip", "--bundle", "nowhere.json"], "--bundle nowhere.json: no such file", id="no-bundle"),
    pytest.param(["asset.zip", "--bundle", "b.json", "--repo", "llama.cpp"], "--repo: repository 'llama.cpp' is "
                 "not OWNER/NAME", id="repo-of-another-shape"),
    pytest.param(["asset.zip", "--bundle", "b.json", "--workflow", "/x.yml"], "--workflow: workflow '/x.yml'",
                 id="workflow-of-another-shape"),
    pytest.param(["asset.zip", "--bundle", "b.json", "--trust-root", "none.json"], "--trust-root none.json: no such",
                 id="no-trust-root"),
    pytest.param(["asset.zip", "--repo", "a/b"], "the following arguments are required: --bundle", id="no-bundle-flag"),
])
def test_a_bad_line_is_a_usage_error(place: Path, argv: list[str], words: str) -> None:
    os.mkfifo(place / "fifo")
    (place / "b.json").write_text("{}")
    repo = [] if "--repo" in argv else ["--repo", "a/b"]
    run = cli.run("superfluid", "attestation", "verify", *argv, *repo, env=cli.environment(place / "home"),
                  cwd=place, timeout=60)
    assert run.code == 2 and words in run.stderr, run.stderr


def test_the_variable_naming_no_file_is_a_usage_error(place: Path) -> None:
    (place / "b.json").write_text("{}")
    run = attest(place, "asset.zip", "--bundle", "b.json", "--repo", "a/b", root=False,
                 SUPERFLUID_SIGSTORE_ROOT=str(place / "gone.json"))
    assert run.code == 2 and f"SUPERFLUID_SIGSTORE_ROOT {place / 'gone.json'}: no such file" in run.stderr


def test_a_trusted_root_that_is_none_is_refused(place: Path, sigstore: SigstoreSimulator) -> None:
    (place / "trusted_root.json").write_text(json.dumps({"mediaType": "something else"}))
    run = attest(place, "asset.zip", "--bundle", "asset.zip.sigstore.json", *IDENTITY, bundle=sigstore.sign(ASSET))
    assert run.code == 1 and "trusted_root.json: is not a Sigstore trusted root" in run.stderr, run.stderr


# --- a bundle GitHub Actions made under the public Sigstore -----------------------------------------------------


def _public(tmp_path: Path, *argv: str) -> Run:
    """The real bundle checked with the production root, offline: no proxy reachable, a home of its own
    where nothing may be written (no TUF refresh, no cache of sigstore-python's)."""
    found = public.public_bundle()
    home = tmp_path / "user"
    home.mkdir()
    dead = "http://127.0.0.1:9"
    env = cli.environment(tmp_path / "superfluid-home", HOME=str(home), XDG_CACHE_HOME=str(home / "cache"),
                          XDG_DATA_HOME=str(home / "data"), HTTPS_PROXY=dead, HTTP_PROXY=dead, https_proxy=dead,
                          http_proxy=dead, NO_PROXY="", no_proxy="")
    other = tmp_path / "other.tar.gz"
    other.write_bytes(found.file.read_bytes() + b"\0")
    files = {"FILE": str(found.file), "OTHER": str(other), "BUNDLE": str(found.bundle)}
    run = cli.run("superfluid", "attestation", "verify", *(files.get(a, a) for a in argv), env=env, timeout=60)
    assert list(home.iterdir()) == [], "something was written under the user's home"
    return run


def test_a_bundle_github_actions_made_verifies_with_the_production_root_offline(tmp_path: Path) -> None:
    run = _public(tmp_path, "FILE", "--bundle", "BUNDLE", "--repo", public.REPOSITORY, "--workflow", public.WORKFLOW,
                  "--ref", "refs/tags/v*", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert schema_errors(doc, "attestation-verify") == []
    assert doc["trust_root"].startswith("the public Sigstore's root")
    proven = doc["provenance"]
    assert (proven["repository"], proven["workflow"], proven["ref"], proven["commit"], proven["predicate_type"]) == (
        public.REPOSITORY, public.WORKFLOW, public.REF, public.COMMIT, "https://slsa.dev/provenance/v1")
    assert proven["integrated_time"] == "2024-12-04T23:13:46Z" and proven["log_index"] > 0


@pytest.mark.parametrize(("argv", "words"), [
    pytest.param(["OTHER", "--bundle", "BUNDLE", "--repo", public.REPOSITORY], "is for other bytes than", id="bytes"),
    pytest.param(["FILE", "--bundle", "BUNDLE", "--repo", "sigstore/sigstore-python"],
                 f"was signed by a workflow of {public.REPOSITORY}, not of sigstore/sigstore-python", id="repository"),
])
def test_the_real_bundle_is_refused_for_other_bytes_or_another_repository(tmp_path: Path, argv: list[str],
                                                                         words: str) -> None:
    run = _public(tmp_path, *argv)
    assert run.code == 1 and words in run.stderr, run.stderr
