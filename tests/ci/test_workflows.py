"""The workflows: ``ci.yml`` runs the README's test command; ``release.yml`` puts every file ``ci/pack``
wrote on the GitHub release (SPEC §9: the seed's release job carried only the tarball and its digest),
and attests each artifact and its compat.json with ``actions/attest-build-provenance``, each bundle
uploaded beside the file it attests as ``<file>.sigstore.json`` (issue 46, item 5).

The checks run the release job as data (``tests/ci/release_job.py``): the step that runs ``ci/pack --out
DIR``, then the steps after it in the same job, in order, in a workspace holding exactly what ``ci/pack``
wrote into ``DIR``: an attest step's subject patterns expanded there, a plain ``run:`` step run by bash,
the ``gh release create|upload`` file arguments expanded as the shell would. Any file no argument matches
would not reach the release. A hop this check does not model (an artifact passed to another job, another
action) fails it rather than passing unexamined. Each check has its table of broken workflows, each
refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.release_files import ATTESTED_SUFFIXES, BUNDLE_SUFFIX, PACK_SUFFIXES
from tests.ci.conftest import Packed, ci_env, run_ci
from tests.ci.release_job import ATTEST_ACTIONS, Job, commands, load, pack_job, run_release_job
from tests.conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
_load = load


def _bundle_of(subjects: list[Path]) -> bytes:
    """A stand-in bundle naming its subjects (tests/ci/test_release_attested.py signs real ones)."""
    return json.dumps({"subjects": sorted(p.name for p in subjects)}).encode()


def _job(workflow: dict[str, Any], written: list[str], scratch: Path) -> Job:
    return run_release_job(workflow, {name: name.encode() for name in written}, scratch, _bundle_of)


def unreleased(workflow: dict[str, Any], written: list[str], scratch: Path) -> list[str]:
    """The files ``ci/pack`` wrote (names) that the release workflow would not upload.

    Raises:
        AssertionError: the workflow has no ``ci/pack`` step, no upload after it, or a step the job's
            model does not run (an artifact handed to another job: fail, do not guess).
    """
    job = _job(workflow, written, scratch)
    assert job.uploads, f"job {job.job_id} runs ci/pack and uploads nothing to the release after it"
    return sorted(set(written) - set(job.uploaded))


@pytest.fixture
def release_yml() -> str:
    return (WORKFLOWS / "release.yml").read_text()


@pytest.mark.slow
def test_every_file_ci_pack_writes_reaches_the_release(release_yml: str, packed: Packed, tmp_path: Path) -> None:
    written = [p.name for p in packed.written]
    assert {s for s in PACK_SUFFIXES for n in written if n.endswith(s)} == set(PACK_SUFFIXES)  # every kind made
    assert unreleased(_load(release_yml), written, tmp_path) == []


#: files of a pack run, by kind (names as ci/pack writes them), for the mutation cases below
_WRITTEN = [f"{a}{s}" for a in ("superfluid_toolchain-1.0.tar.gz", "superfluid_toolchain-1.0-py3-none-any.whl")
            for s in ("", *PACK_SUFFIXES)]


@pytest.mark.parametrize(("upload", "missing"), [
    pytest.param("dist/*.tar.gz dist/*.whl dist/*.sha256", (".compat.json", ".minisig"), id="seed-bug"),
    pytest.param("dist/*.tar.gz dist/*.whl dist/*.sha256 dist/*.compat.json", (".minisig",), id="no-minisig"),
    pytest.param("dist/*.tar.gz dist/*.whl dist/*.sha256 dist/*.minisig", (".compat.json",), id="no-compat-json"),
    pytest.param("dist/*.whl*", (".tar.gz", ".tar.gz.sha256", ".tar.gz.compat.json", ".tar.gz.compat.json.minisig"),
                 id="wheel-only"),
    pytest.param("out/*", ("",), id="another-folder"),
])
def test_a_release_yml_that_drops_a_kind_fails(release_yml: str, tmp_path: Path, upload: str,
                                               missing: tuple[str, ...]) -> None:
    assert " dist/*\n" in release_yml  # the upload this case rewrites
    broken = _load(release_yml.replace(" dist/*\n", f" {upload}\n"))
    lost = unreleased(broken, _WRITTEN, tmp_path)
    assert lost and all(any(n.endswith(m) for m in missing) for n in lost)
    for kind in missing:
        assert any(n.endswith(kind) for n in lost)


def test_the_unmodelled_artifact_hop_fails_closed(release_yml: str, tmp_path: Path) -> None:
    doc = _load(release_yml)
    job = next(j for j in doc["jobs"].values() if any("ci/pack" in str(s.get("run")) for s in j["steps"]))
    at = next(i for i, s in enumerate(job["steps"]) if "ci/pack" in str(s.get("run")))
    job["steps"].insert(at + 1, {"uses": "actions/upload-artifact@v4",
                                 "with": {"name": "dist", "path": "dist/*.tar.gz\ndist/*.sha256"}})
    with pytest.raises(AssertionError, match="hands the pack output on through"):
        unreleased(doc, _WRITTEN, tmp_path)


def test_release_runs_on_tags_after_the_tests_and_only_pack_sees_the_key(release_yml: str) -> None:
    doc = _load(release_yml)
    assert doc["on"] == {"push": {"tags": ["v*"]}}
    jobs = doc["jobs"]
    tests = [j for j, job in jobs.items() if any(s.get("run") == ".ci/run" for s in job["steps"])]
    (pack_job,) = [j for j, job in jobs.items() if any("ci/pack" in str(s.get("run")) for s in job["steps"])]
    needs = jobs[pack_job].get("needs") or []
    assert tests and set(tests) <= set([needs] if isinstance(needs, str) else needs)  # no release unless tests pass
    carriers = [(j, s.get("name")) for j, job in jobs.items() for s in job["steps"]
                if "SUPERFLUID_SIGNING_KEY" in str(s.get("env") or {})]
    assert carriers == [(pack_job, next(s["name"] for s in jobs[pack_job]["steps"] if "ci/pack" in str(s.get("run"))))]
    assert all("SUPERFLUID_SIGNING_KEY" not in str(job.get("env") or {}) for job in jobs.values())
    assert "SUPERFLUID_SIGNING_KEY" not in str(doc.get("env") or {})
    assert "secrets.SUPERFLUID_SIGNING_KEY" in release_yml


def test_ci_runs_the_readmes_test_command_on_push_and_pull_request() -> None:
    doc = _load((WORKFLOWS / "ci.yml").read_text())
    assert {"push", "pull_request"} <= set(doc["on"])
    runs = [s.get("run") for job in doc["jobs"].values() for s in job["steps"]]
    assert ".ci/run" in runs
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in (ROOT / "README.md").read_text()
    # the fresh CI machine gets minisign: scripts/test installs the system tools first
    assert '"minisign minisign"' in (ROOT / "scripts" / "system-tools").read_text()
    assert "bash scripts/system-tools test" in (ROOT / "scripts" / "test").read_text()


# -- attestations (issue 46, item 5) ------------------------------------------------------------------


def _to_attest(written: list[str]) -> list[str]:
    """The files of a pack run the release attests: each artifact and its compat.json."""
    artifacts = [n for n in written if not n.endswith(PACK_SUFFIXES)]
    return [a + s for a in artifacts for s in ATTESTED_SUFFIXES]


def attestation_faults(workflow: dict[str, Any], written: list[str], scratch: Path) -> list[str]:
    """What keeps the release job from attesting every artifact and compat.json it uploads with the
    bundle beside each (``faults_of``).

    Raises:
        AssertionError: as ``run_release_job`` (a step that fails, a subject pattern that matches nothing).
    """
    return faults_of(_job(workflow, written, scratch), _to_attest(written))


def faults_of(job: Job, to_attest: list[str]) -> list[str]:
    """What keeps ``job`` from attesting each file of ``to_attest`` with its bundle beside it: a file not
    uploaded, or uploaded and named by no attestation, or with no ``<file>.sigstore.json`` uploaded beside
    it that is the bundle of an attestation naming it; a bundle beside nothing."""
    faults = []
    for name in to_attest:
        if name not in job.uploaded:
            faults.append(f"{name} is not uploaded")
            continue
        attestations = job.attested(name)
        if not attestations:
            faults.append(f"{name} is uploaded and not attested")
            continue
        bundle = job.uploaded.get(name + BUNDLE_SUFFIX)
        if bundle is None:
            faults.append(f"{name} is uploaded without its bundle {name}{BUNDLE_SUFFIX}")
        elif bundle.read_bytes() not in {a.bundle.read_bytes() for a in attestations}:
            faults.append(f"{name}{BUNDLE_SUFFIX} is not the bundle of an attestation of {name}")
    faults += [f"{name} is beside no uploaded file" for name in job.uploaded
               if name.endswith(BUNDLE_SUFFIX) and name.removesuffix(BUNDLE_SUFFIX) not in job.uploaded]
    return faults


def permission_faults(workflow: dict[str, Any]) -> list[str]:
    """Least privilege: the workflow reads contents; the job that attests, and it alone, may mint an
    OIDC token (``id-token: write``), store attestations and write the release (``contents: write``)."""
    faults = []
    if workflow.get("permissions") != {"contents": "read"}:
        faults.append(f"the workflow's permissions are {workflow.get('permissions')!r}, not contents: read")
    wanted = {"contents": "write", "id-token": "write", "attestations": "write"}
    for job_id, job in workflow["jobs"].items():
        attests = any(str(s.get("uses", "")).split("@", 1)[0] in ATTEST_ACTIONS for s in job.get("steps") or [])
        granted = job.get("permissions")
        if attests and granted != wanted:
            faults.append(f"job {job_id} attests with permissions {granted!r}, not {wanted}")
        if not attests and granted is not None and (not isinstance(granted, dict) or
                                                    set(granted.values()) - {"read", "none"}):
            faults.append(f"job {job_id} attests nothing and is granted {granted!r}")
    return faults


_SHA = re.compile(r"^[0-9a-f]{40}$")


def pin_faults(text: str) -> list[str]:
    """Every action is pinned to a ref, and an attest action to a full commit SHA with its version named
    in a comment beside it (``@<sha>  # v4.1.0``): the action that signs what ships is never a moving tag."""
    faults = []
    jobs = load(text)["jobs"]
    if not any(str(s.get("uses", "")).split("@", 1)[0] in ATTEST_ACTIONS for j in jobs.values() for s in j["steps"]):
        faults.append(f"no step uses {' or '.join(ATTEST_ACTIONS)}")
    for job_id, job in jobs.items():
        for step in job.get("steps") or []:
            uses = str(step.get("uses") or "")
            if not uses:
                continue
            action, at, ref = uses.partition("@")
            if not at or not ref:
                faults.append(f"job {job_id}: {uses} names no ref")
            elif action in ATTEST_ACTIONS:
                if not _SHA.match(ref):
                    faults.append(f"job {job_id}: {uses} is not pinned to a commit SHA")
                elif not re.search(rf"uses: {re.escape(uses)}\s+# v\d+\.\d+\.\d+\b", text):
                    faults.append(f"job {job_id}: {uses} has no comment naming its version")
    return faults


def claim_faults(workflow: dict[str, Any]) -> list[str]:
    """``ci/pack --attested`` (each compat.json names this workflow as the one that attests it) is run
    by the job that attests, and only there."""
    job_id, job, at, _ = pack_job(workflow)
    claims = any("--attested" in c for c in commands(job["steps"][at]["run"]))
    attests = any(str(s.get("uses", "")).split("@", 1)[0] in ATTEST_ACTIONS for s in job["steps"][at + 1:])
    if attests and not claims:
        return [f"job {job_id} attests, and its ci/pack does not say so (--attested)"]
    if claims and not attests:
        return [f"job {job_id}'s ci/pack says --attested, and nothing after it attests"]
    return []


def test_every_artifact_and_compat_json_is_attested_with_its_bundle_beside_it(release_yml: str,
                                                                               tmp_path: Path) -> None:
    workflow = load(release_yml)
    assert attestation_faults(workflow, _WRITTEN, tmp_path) == []
    job = _job(workflow, _WRITTEN, tmp_path / "again")
    assert sorted(n for n in job.uploaded if n.endswith(BUNDLE_SUFFIX)) == sorted(
        n + BUNDLE_SUFFIX for n in _to_attest(_WRITTEN))
    assert sorted(n for n in job.uploaded if not n.endswith(BUNDLE_SUFFIX)) == sorted(_WRITTEN)


def test_the_release_job_is_least_privileged_the_attest_action_pinned_and_the_claim_made(release_yml: str) -> None:
    workflow = load(release_yml)
    assert permission_faults(workflow) == []
    assert pin_faults(release_yml) == []
    assert claim_faults(workflow) == []


_SUBJECTS = "            dist/*.tar.gz\n            dist/*.whl\n            dist/*.compat.json\n"
_LOOP = "for file in dist/*.tar.gz dist/*.whl dist/*.compat.json; do"
_COPY = "cp \"$BUNDLE\" \"$file.sigstore.json\""
_PIN = "actions/attest-build-provenance@a2bbfa25375fe432b6a289bc6b6cd05ecd0c4c32  # v4.1.0"


def _without_step(text: str, name: str) -> str:
    """``text`` without the step whose ``- name:`` line starts with ``name`` (up to the next step)."""
    start = text.index(f"      - name: {name}")
    end = text.index("      - ", start + 1)
    return text[:start] + text[end:]


def _bundles_after_the_upload(text: str) -> str:
    start = text.index("      - name: The attestation's bundle")
    end = text.index("      - name: Publish")
    return text[:start] + text[end:] + text[start:end]


@pytest.mark.parametrize(("change", "fault"), [
    pytest.param(lambda t: t.replace(_SUBJECTS, "            dist/*.tar.gz\n            dist/*.whl\n"),
                 "compat.json is uploaded and not attested", id="compat-json-not-attested"),
    pytest.param(lambda t: t.replace(_SUBJECTS, "            dist/*.tar.gz\n            dist/*.compat.json\n"),
                 ".whl is uploaded and not attested", id="wheel-not-attested"),
    pytest.param(lambda t: t.replace(_SUBJECTS, "            dist/superfluid.tar.gz\n"),
                 "Could not find subject at path dist/superfluid.tar.gz", id="a-subject-that-is-not-there"),
    pytest.param(lambda t: _without_step(t, "The attestation's bundle"), "without its bundle", id="no-bundles"),
    pytest.param(lambda t: t.replace(_LOOP, _LOOP.replace(" dist/*.compat.json;", ";")),
                 ".compat.json is uploaded without its bundle", id="no-bundle-beside-compat-json"),
    pytest.param(lambda t: t.replace(_COPY, _COPY.replace(".sigstore.json", ".intoto.jsonl")), "without its bundle",
                 id="bundles-named-otherwise"),
    pytest.param(lambda t: t.replace(_COPY, _COPY.replace('"$BUNDLE"', "/etc/hostname")),
                 "is not the bundle of an attestation", id="another-file-as-the-bundle"),
    pytest.param(_bundles_after_the_upload, "without its bundle", id="bundles-made-after-the-upload"),
    pytest.param(lambda t: _without_step(t, "Attest the artifacts"), "failed", id="no-attestation"),
])
def test_a_release_yml_that_does_not_attest_every_file_fails(release_yml: str, tmp_path: Path, change: Any,
                                                             fault: str) -> None:
    broken = change(release_yml)
    assert broken != release_yml
    try:
        faults = attestation_faults(load(broken), _WRITTEN, tmp_path)
    except AssertionError as e:
        faults = [str(e)]
    assert any(fault in f for f in faults), faults


@pytest.mark.parametrize(("change", "check", "fault"), [
    pytest.param(lambda t: t.replace("      id-token: write", "      id-token: read"), "permissions",
                 "job release attests with permissions", id="no-oidc-token"),
    pytest.param(lambda t: t.replace("      attestations: write", ""), "permissions",
                 "job release attests with permissions", id="attestations-not-writable"),
    pytest.param(lambda t: t.replace("  attestations: write  #", "  packages: write  #"), "permissions",
                 "job release attests with permissions", id="more-than-it-needs"),
    pytest.param(lambda t: t.replace("permissions:\n  contents: read\n", "permissions: write-all\n"), "permissions",
                 "not contents: read", id="the-workflow-writes"),
    pytest.param(lambda t: t.replace("    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n",
                                     "    runs-on: ubuntu-latest\n    permissions:\n      id-token: write\n"
                                     "    steps:\n      - uses: actions/checkout@v4\n", 1), "permissions",
                 "job test attests nothing and is granted", id="the-test-job-mints-tokens"),
    pytest.param(lambda t: t.replace(_PIN, "actions/attest-build-provenance@v4"), "pins",
                 "is not pinned to a commit SHA", id="a-moving-tag"),
    pytest.param(lambda t: t.replace(_PIN, "actions/attest-build-provenance@main"), "pins",
                 "is not pinned to a commit SHA", id="a-branch"),
    pytest.param(lambda t: t.replace(_PIN, _PIN.split("  #")[0]), "pins", "has no comment naming its version",
                 id="a-sha-without-its-version"),
    pytest.param(lambda t: t.replace("uses: actions/setup-python@v5", "uses: actions/setup-python"), "pins",
                 "names no ref", id="an-action-without-a-ref"),
    pytest.param(lambda t: t.replace("ci/pack --out dist --attested", "ci/pack --out dist"), "claim",
                 "does not say so (--attested)", id="compat-json-does-not-name-the-workflow"),
    pytest.param(lambda t: _without_step(_without_step(t, "Attest the artifacts"), "The attestation's bundle"),
                 "claim", "nothing after it attests", id="a-claim-nothing-backs"),
])
def test_a_release_yml_that_grants_too_much_or_pins_loosely_fails(release_yml: str, change: Any, check: str,
                                                                  fault: str) -> None:
    broken = change(release_yml)
    assert broken != release_yml
    faults = {"permissions": lambda: permission_faults(load(broken)), "pins": lambda: pin_faults(broken),
              "claim": lambda: claim_faults(load(broken))}[check]()
    assert any(fault in f for f in faults), faults


# -- an engine's release workflow, as docs/release.md shows it (issue 46, item 5) ----------------------

_ENGINE_MARK = "<!-- engine-release-workflow -->\n```yaml\n"


def engine_workflow() -> str:
    """The engine release workflow docs/release.md shows, as written there."""
    text = (ROOT / "docs" / "release.md").read_text()
    start = text.index(_ENGINE_MARK) + len(_ENGINE_MARK)
    return text[start:text.index("```\n", start)]


def _engine_files(version: str, abi: int | None) -> dict[str, list[str]]:
    """What ``ci/engine-assets`` writes for linux-x64 (docs/release.md): all, and what is attested."""
    bundle = f"basert-engine-linux-x64-{version}.tar.gz"
    attested = [bundle, f"{bundle}.needs.json"] + ([f"basert-engine-abi-{abi}.txt"] if abi is not None else [])
    return {"written": [*attested, f"{bundle}.sha256"], "attested": attested}


@pytest.mark.parametrize(("version", "abi"), [
    pytest.param("0.4.0", 1, id="states-abi-1"),
    pytest.param("0.3.0", None, id="unnumbered-no-abi-asset"),
])
def test_the_engine_release_workflow_the_docs_show_attests_every_asset(tmp_path: Path, version: str,
                                                                        abi: int | None) -> None:
    text = engine_workflow()
    files = _engine_files(version, abi)
    job = run_release_job(load(text), {n: n.encode() for n in files["written"]}, tmp_path, _bundle_of,
                          producer="ci/engine-assets")
    assert faults_of(job, files["attested"]) == []
    assert sorted(job.uploaded) == sorted([*files["written"], *(n + BUNDLE_SUFFIX for n in files["attested"])])
    assert permission_faults(load(text)) == [] and pin_faults(text) == []


def test_the_engine_workflow_pins_the_action_superfluid_pins() -> None:
    assert _PIN in engine_workflow() and _PIN in (WORKFLOWS / "release.yml").read_text()


@pytest.mark.parametrize(("step", "names", "section"), [
    pytest.param("pack", "<file>.sigstore.json", "## Attestations\n", id="ci-pack"),
    pytest.param("engine-assets", "<asset>.sigstore.json", "**Attesting an engine's release.**", id="ci-engine-assets"),
])
def test_the_ci_steps_name_the_bundle_beside_each_file_and_where_the_step_is_shown(step: str, names: str,
                                                                                  section: str) -> None:
    assert names in (ROOT / "ci" / step).read_text()  # the script's own header, read before it is run
    done = run_ci(step, "--help", env=ci_env(), timeout=60)
    assert done.returncode == 0 and names in " ".join(done.stdout.split()), done.stdout
    assert section in (ROOT / "docs" / "release.md").read_text()
