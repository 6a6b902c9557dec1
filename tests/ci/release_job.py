"""A release workflow's job, run as data: what reaches the GitHub release, and what is attested.

``run_release_job`` takes a workflow as parsed (``release.yml``, or the engine release workflow
docs/release.md shows), puts the files its producer (``ci/pack``, ``ci/engine-assets``) writes into a
scratch workspace (under the ``--out`` folder of the producer's step), then walks the steps after that
one, in order, as GitHub Actions would:

- ``actions/attest-build-provenance`` (or ``actions/attest``): its ``subject-path`` patterns (a list by
  lines or commas, each a glob) are expanded in the workspace as they stand at that step; none matching
  anything fails the step (as the action does: ``Could not find subject at path``), and
  ``make_bundle(subjects)`` writes the bundle its ``bundle-path`` output names;
- a ``run:`` step that uploads (``gh release create|upload TAG FILE...``) is not run: its file
  arguments are expanded as the shell would at that step (beside them only ``ls`` and ``echo``);
- any other ``run:`` step is run, by bash as the runner runs it (``bash --noprofile --norc -eo pipefail``)
  in the workspace, with its ``env``; the only expressions it may hold are ``${{ steps.ID.outputs.NAME }}``
  in its ``env`` (an expression in the script itself is an injection the workflow must not have);
- anything else (another action, an artifact handed to another job) is not modelled and fails the walk
  rather than passing unexamined.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Attestation", "Job", "ATTEST_ACTIONS", "load", "commands", "pack_out", "release_files",
           "run_release_job", "pack_job"]

#: the actions that make a build provenance attestation (attest-build-provenance v4 wraps attest)
ATTEST_ACTIONS = ("actions/attest-build-provenance", "actions/attest")
#: gh release create/upload flags that take a value (the rest are switches)
_GH_VALUED = {"--title", "-t", "--notes", "-n", "--notes-file", "-F", "--target", "--discussion-category",
              "--repo", "-R", "--notes-start-tag", "--fail-on-no-commits"}
_READ_ONLY = {"ls", "echo"}  # what an upload step may do beside uploading
_STEP_OUTPUT = re.compile(r"^\$\{\{\s*steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)\s*\}\}$")
_BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]


def load(text: str) -> dict[str, Any]:
    """A workflow file as data (the key ``on`` kept as ``on``: YAML 1.1 reads it as true)."""
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def commands(run: str) -> list[list[str]]:
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


def pack_out(command: list[str], producer: str = "ci/pack") -> str | None:
    """``DIR`` of a ``ci/pack --out DIR`` command (or ``producer``'s), or None for another command."""
    if not command or not command[0].endswith(producer):
        return None
    args = command[1:]
    for i, word in enumerate(args):
        if word == "--out" and i + 1 < len(args):
            return args[i + 1]
        if word.startswith("--out="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{producer} without --out: {command}")


def release_files(command: list[str]) -> list[str] | None:
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


def pack_job(workflow: Mapping[str, Any], producer: str = "ci/pack") -> tuple[str, dict[str, Any], int, str]:
    """The job that runs ``ci/pack`` (or ``producer``): its id, the job, the index of that step and its
    ``--out`` folder.

    Raises:
        AssertionError: no step runs it.
    """
    for job_id, job in workflow["jobs"].items():
        for i, step in enumerate(job.get("steps") or []):
            outs = [d for c in commands(step.get("run") or "") if (d := pack_out(c, producer)) is not None]
            if outs:
                return job_id, job, i, outs[-1]
    raise AssertionError(f"no step runs {producer}")


@dataclass
class Attestation:
    """One attest step as run: the action it uses, the files it attests and the bundle it made."""

    step: str
    uses: str
    subjects: list[str]  # workspace paths, as the patterns matched them
    bundle: Path


@dataclass
class Job:
    """What the job did: its attestations, and the files each upload step sent, by name."""

    job_id: str
    workspace: Path
    attestations: list[Attestation] = field(default_factory=list)
    uploads: list[str] = field(default_factory=list)  # the upload commands' file arguments, as written
    uploaded: dict[str, Path] = field(default_factory=dict)  # file name -> its path in the workspace

    def attested(self, name: str) -> list[Attestation]:
        """The attestations whose subjects hold the file ``name`` (by its name: one folder)."""
        return [a for a in self.attestations if name in {Path(s).name for s in a.subjects}]


def _patterns(value: str) -> list[str]:
    return [p.strip() for line in value.splitlines() for p in line.split(",") if p.strip()]


def _expand(patterns: Sequence[str], workspace: Path) -> list[str]:
    return sorted({p for pattern in patterns for p in glob.glob(pattern, root_dir=workspace)})


def _attest(step: Mapping[str, Any], index: int, job: Job, outputs: dict[str, dict[str, str]],
            make_bundle: Callable[[list[Path]], bytes]) -> None:
    inputs = step.get("with") or {}
    patterns = _patterns(str(inputs.get("subject-path") or ""))
    assert patterns, f"step {index} ({step['uses']}) names no subject-path"
    subjects = [s for s in _expand(patterns, job.workspace) if (job.workspace / s).is_file()]
    assert subjects, f"the attest step failed: Could not find subject at path {', '.join(patterns)}"
    bundle = job.workspace.parent / f"attestation-{index}.json"  # the action writes it outside the workspace
    bundle.write_bytes(make_bundle([job.workspace / s for s in subjects]))
    outputs[str(step.get("id") or index)] = {"bundle-path": str(bundle)}
    job.attestations.append(Attestation(str(step.get("name") or step.get("id") or index), str(step["uses"]),
                                        subjects, bundle))


def _step_env(step: Mapping[str, Any], outputs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    env = {}
    for name, value in (step.get("env") or {}).items():
        text = str(value)
        if "${{" in text:
            m = _STEP_OUTPUT.match(text.strip())
            assert m is not None, f"{name}: {text} is an expression this model does not evaluate"
            env[name] = outputs.get(m.group(1), {}).get(m.group(2), "")  # as Actions: no such output is empty
        else:
            env[name] = text
    return env


def _run(step: Mapping[str, Any], job: Job, outputs: Mapping[str, Mapping[str, str]]) -> None:
    script = str(step["run"])
    uploads = [fs for c in commands(script) if (fs := release_files(c)) is not None]
    if uploads:
        others = [c for c in commands(script) if release_files(c) is None and c[0] not in _READ_ONLY]
        assert not others, f"an upload step also runs {others}: this model does not"
        job.uploads += [f for fs in uploads for f in fs]
        for name in _expand([f for fs in uploads for f in fs], job.workspace):
            job.uploaded[Path(name).name] = job.workspace / name
        return
    assert "${{" not in script, f"an expression in a run script (pass it through env): {script!r}"
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(job.workspace.parent)}
    env.update(_step_env(step, outputs))
    done = subprocess.run([*_BASH, script], cwd=job.workspace, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"the step {step.get('name')!r} failed: {done.stderr}"


def run_release_job(workflow: Mapping[str, Any], written: Mapping[str, bytes], scratch: Path,
                    make_bundle: Callable[[list[Path]], bytes], producer: str = "ci/pack") -> Job:
    """Run the steps after ``ci/pack`` (or ``producer``) of the job that runs it, it having written
    ``written`` (file name -> bytes) into its ``--out`` folder; what the job attested and uploaded.

    Raises:
        AssertionError: a step this model does not run (module doc), an attest pattern that matches
            nothing, or a ``run:`` step that fails.
    """
    job_id, spec, at, out = pack_job(workflow, producer)
    job = Job(job_id, scratch / f"workspace-{job_id}")
    (job.workspace / out).mkdir(parents=True)
    for name, data in written.items():
        (job.workspace / out / name).write_bytes(data)
    outputs: dict[str, dict[str, str]] = {}
    for index, step in enumerate(spec["steps"][at + 1:], start=at + 1):
        uses = str(step.get("uses") or "")
        if uses.split("@", 1)[0] in ATTEST_ACTIONS:
            _attest(step, index, job, outputs, make_bundle)
        elif uses:
            raise AssertionError(f"job {job_id} hands the pack output on through {uses}: this check does not "
                                 f"model it")
        elif step.get("run"):
            _run(step, job, outputs)
    return job
