"""The workflows: ``ci.yml`` runs the README's test command; ``release.yml`` puts every file ``ci/pack``
wrote on the GitHub release (SPEC §9: the seed's release job carried only the tarball and its digest).

The release check reads the workflow as data: the step that runs ``ci/pack --out DIR``, then the
``gh release create|upload`` commands after it in the same job, whose file arguments are expanded as
the shell would in a workspace holding exactly what ``ci/pack`` wrote into ``DIR``. Any file no
argument matches would not reach the release. A hop this check does not model (an artifact passed
to another job) fails it rather than passing unexamined.
"""

from __future__ import annotations

import glob
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from superfluid.manifest.release_files import PACK_SUFFIXES
from tests.ci.conftest import Packed
from tests.conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
#: gh release create/upload flags that take a value (the rest are switches)
_GH_VALUED = {"--title", "-t", "--notes", "-n", "--notes-file", "-F", "--target", "--discussion-category",
              "--repo", "-R", "--notes-start-tag", "--fail-on-no-commits"}


def _load(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def _commands(run: str) -> list[list[str]]:
    """The simple commands of a ``run:`` script (continuations joined, split at ; && ||)."""
    out: list[list[str]] = []
    for line in run.replace("\\\n", " ").splitlines():
        words: list[str] = []
        for word in shlex.split(line, comments=True):
            if word in (";", "&&", "||"):
                out.append(words)
                words = []
            else:
                words.append(word)
        out.append(words)
    return [c for c in out if c]


def _pack_out(command: list[str]) -> str | None:
    """``DIR`` of a ``ci/pack --out DIR`` command, or None for another command."""
    if not command or not command[0].endswith("ci/pack"):
        return None
    args = command[1:]
    for i, word in enumerate(args):
        if word == "--out" and i + 1 < len(args):
            return args[i + 1]
        if word.startswith("--out="):
            return word.split("=", 1)[1]
    raise AssertionError(f"ci/pack without --out: {command}")


def _release_files(command: list[str]) -> list[str] | None:
    """The file arguments of ``gh release create|upload TAG FILE...``; None for another command."""
    if command[:2] != ["gh", "release"] or len(command) < 3 or command[2] not in ("create", "upload"):
        return None
    positional: list[str] = []
    words = iter(command[3:])
    for word in words:
        if word in _GH_VALUED:
            next(words, None)
        elif not word.startswith("-"):
            positional.append(word.split("#", 1)[0])  # FILE#label
    return positional[1:]  # the first is the tag


def unreleased(workflow: dict[str, Any], written: list[str], scratch: Path) -> list[str]:
    """The files ``ci/pack`` wrote (names) that the release workflow would not upload.

    Raises:
        AssertionError: the workflow has no ``ci/pack`` step, no upload after it, or hands files to
            another job through an artifact (a hop not modelled here: fail, do not guess).
    """
    for job_id, job in workflow["jobs"].items():
        steps = job.get("steps") or []
        for i, step in enumerate(steps):
            outs = [d for c in _commands(step.get("run") or "") if (d := _pack_out(c)) is not None]
            if not outs:
                continue
            later = steps[i + 1:]
            hops = [s["uses"] for s in later if "upload-artifact" in str(s.get("uses", ""))]
            assert not hops, f"job {job_id} hands the pack output on through {hops}: this check does not model it"
            patterns = [f for s in later for c in _commands(s.get("run") or "") if (fs := _release_files(c)) is not None
                        for f in fs]
            assert patterns, f"job {job_id} runs ci/pack and uploads nothing to the release after it"
            workspace = scratch / f"workspace-{job_id}"
            (workspace / outs[-1]).mkdir(parents=True)
            for name in written:
                (workspace / outs[-1] / name).write_bytes(b"")
            uploaded = {Path(p).name for pattern in patterns for p in glob.glob(pattern, root_dir=workspace)}
            return sorted(set(written) - uploaded)
    raise AssertionError("no step runs ci/pack")


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
