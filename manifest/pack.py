"""The release pack step, ``ci/pack --out DIR [--unsigned]``.

See docs/release.md, "Running the pack step yourself".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename

from superfluid.installer.trust.identity import Identity, of_workflow_ref
from superfluid.manifest.command_line import ManifestParser, report_written
from superfluid.manifest.compat import validate, with_attestation, with_tarball
from superfluid.manifest.index import MAX_DOCUMENT_BYTES
from superfluid.manifest.keys import signing_key
from superfluid.manifest.minisign import SecretKey, sign, verify
from superfluid.manifest.release_files import COMPAT_SUFFIX, SHA256_SUFFIX, SIGNATURE_SUFFIX, file_sha256, sha256_line
from superfluid.manifest.settings import ENV_KEY, ENV_KEY_FILE, ENV_WORKFLOW_REF, Settings, read_settings
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError, guarded
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.process import scrubbed_env

__all__ = ["PackError", "Packed", "pack", "compat_of_wheel", "attesting_workflow", "main"]

_PROG = "ci/pack"
_TAIL_LINES = 30  # lines of a failed child's output shown
_BUILD_TIMEOUT = 900.0  # seconds for `python -m build` (it may fetch its build requirements)
_INSTALL_TIMEOUT = 900.0  # seconds to install the wheel and its dependencies into the fresh venv
_COMPAT_TIMEOUT = 300.0  # seconds for the artifact's `superfluid compat --json`


class PackError(SuperfluidError):
    """A pack step failed: the build, the fresh environment, or the artifact's compat answer."""


@dataclass(frozen=True, slots=True)
class Packed:
    """What one pack run wrote into its output directory, in order."""

    artifacts: tuple[Path, ...]
    files: tuple[Path, ...]
    key_id: str | None  # None when --unsigned


def _child_env(inherited: Mapping[str, str]) -> dict[str, str]:
    """The environment of the build and of pip: the caller's, without the signing key's variables."""
    return {k: v for k, v in inherited.items() if k not in (ENV_KEY, ENV_KEY_FILE)}


def _run(argv: Sequence[str], *, env: Mapping[str, str], timeout: float, what: str,
         cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a child; its output is kept, and shown (the tail) when it fails.

    Raises:
        PackError: it could not start, timed out or exited non-zero.
    """
    try:
        done = subprocess.run(list(argv), env=dict(env), cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PackError(f"{what} failed: {e}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-_TAIL_LINES:])
        raise PackError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done


def _build(source: Path, into: Path, child_env: Mapping[str, str]) -> tuple[Path, Path]:
    """The sdist and the wheel built from ``source`` (the wheel from the sdist, as ``build`` does),
    ``build`` run in ``child_env``.

    Raises:
        PackError: ``build`` is missing, the build fails, or it does not make one of each.
    """
    if importlib.util.find_spec("build") is None:
        raise PackError(f"{_PROG} needs the build package in {sys.executable}'s environment",
                        advice="run scripts/setup-env (it installs the test extras, which include it)")
    _run([sys.executable, "-m", "build", "--outdir", str(into), str(source)], env=child_env,
         timeout=_BUILD_TIMEOUT, what=f"python -m build {source}")
    sdists, wheels = sorted(into.glob("*.tar.gz")), sorted(into.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise PackError(f"python -m build made {[p.name for p in sdists + wheels]}; expected one sdist and one wheel")
    return sdists[0], wheels[0]


def compat_of_wheel(wheel: Path, workdir: Path, inherited: Mapping[str, str]) -> dict[str, Any]:
    """What ``wheel``, installed into a fresh virtual environment under ``workdir``, answers to
    ``superfluid compat --json``, validated; ``inherited`` is the caller's environment, which the
    venv and pip run in (less the signing key's variables).

    The artifact's command runs from ``workdir`` with an empty ``SUPERFLUID_HOME``, none of the
    caller's ``SUPERFLUID_*`` or Python path variables, and no credentials: the answer is the wheel's.

    Raises:
        PackError: the venv, the install or the command failed, or the answer is not a complete
            compat document.
    """
    venv, home = workdir / "venv", workdir / "home"
    home.mkdir()
    env = _child_env(inherited)
    _run([sys.executable, "-m", "venv", str(venv)], env=env, timeout=_INSTALL_TIMEOUT, what="python -m venv")
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    _run([str(bindir / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", str(wheel)],
         env=env, timeout=_INSTALL_TIMEOUT, what=f"pip install {wheel.name} into a fresh venv", cwd=str(workdir))
    clean = {k: v for k, v in scrubbed_env(env).items()
             if not k.startswith(("SUPERFLUID_", "PYTHON")) and k not in ("VIRTUAL_ENV", "BASERT_LIB")}
    clean.update(SUPERFLUID_HOME=str(home), VIRTUAL_ENV=str(venv),
                 PATH=os.pathsep.join([str(bindir), clean.get("PATH", os.defpath)]))
    done = _run([str(bindir / "superfluid"), "compat", "--json"], env=clean, timeout=_COMPAT_TIMEOUT,
                what=f"superfluid compat --json of {wheel.name}", cwd=str(workdir))
    try:
        doc = loads(done.stdout, max_bytes=MAX_DOCUMENT_BYTES)
    except UntrustedJson as e:
        raise PackError(f"superfluid compat --json of {wheel.name} answered something other than JSON "
                        f"({e.detail})") from None
    validate(doc, f"superfluid compat --json of {wheel.name}")
    if doc.get("unanswered"):
        raise PackError(f"superfluid compat --json of {wheel.name} is incomplete: {doc['unanswered']}")
    return dict(doc)


def _check_version(doc: Mapping[str, Any], wheel: Path) -> None:
    _, version, _, _ = parse_wheel_filename(wheel.name)
    stated = str(doc["release"]["version"])
    if stated != str(version):
        raise PackError(f"{wheel.name} is version {version}, and its superfluid compat says {stated!r}")


def _document_bytes(doc: Mapping[str, Any]) -> bytes:
    """A compat document as written beside its artifact (the bytes the signature covers)."""
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _timestamp(source_date_epoch: str) -> int:
    """``SOURCE_DATE_EPOCH`` when set (reproducible builds), else now."""
    return int(source_date_epoch) if source_date_epoch.isdigit() else int(time.time())


def _sidecars(artifact: Path, doc: Mapping[str, Any], key: SecretKey | None, timestamp: int,
              attested: Identity | None = None) -> list[Path]:
    """Write ``.sha256``, ``.compat.json`` (stating ``attested``, when given) and (with a key)
    ``.compat.json.minisig`` beside ``artifact``.

    Raises:
        PackError: the signature does not verify with the key's public half (never expected).
    """
    digest = file_sha256(artifact)
    sha_path = artifact.with_name(artifact.name + SHA256_SUFFIX)
    sha_path.write_text(sha256_line(artifact.name, digest), encoding="ascii")
    filled = with_tarball(doc, str(artifact))
    if attested is not None:
        filled = with_attestation(filled, attested)
    filled = validate(filled, f"{artifact.name}{COMPAT_SUFFIX}")
    compat_path = artifact.with_name(artifact.name + COMPAT_SUFFIX)
    body = _document_bytes(filled)
    compat_path.write_bytes(body)
    written = [sha_path, compat_path]
    if key is not None:
        comment = f"timestamp:{timestamp}\tfile:{compat_path.name}\thashed"  # minisign's own trusted comment
        signature = sign(body, key, trusted_comment=comment)
        verify(body, signature, [key.public()], where=compat_path.name)
        sig_path = compat_path.with_name(compat_path.name + SIGNATURE_SUFFIX)
        sig_path.write_text(signature.to_text(), encoding="utf-8")
        written.append(sig_path)
    return written


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: not an empty directory; {_PROG} writes into an empty one, so that "
                         f"what is uploaded is exactly what it wrote")


def attesting_workflow(settings: Settings) -> Identity:
    """The workflow run that runs the pack step and attests what it writes (``--attested``): the one
    GitHub Actions names in ``GITHUB_WORKFLOW_REF``.

    Raises:
        UsageError: it is unset (not a GitHub Actions run), or not ``OWNER/NAME/.github/workflows/FILE@REF``.
    """
    if not settings.workflow_ref:
        raise UsageError(f"--attested: {ENV_WORKFLOW_REF} is unset; only the GitHub Actions workflow that "
                         f"attests the files (actions/attest-build-provenance) states that it does",
                         advice="leave out --attested outside that workflow")
    try:
        return of_workflow_ref(settings.workflow_ref)
    except ValueError as e:
        raise UsageError(f"--attested: {e}") from None


def pack(source: Path, out: Path, settings: Settings, *, unsigned: bool = False, attested: bool = False) -> Packed:
    """Build, describe, digest and sign the release artifacts of ``source`` into ``out``, with the
    signing key ``settings`` name; the build and the fresh environment inherit ``settings``'
    environment (less the signing key's variables). ``attested``: each compat document states the
    workflow running this (``attesting_workflow``), which attests the files after.

    Raises:
        UsageError: no signing key and not ``unsigned`` (or both), two key variables, ``out`` not
            empty, ``attested`` outside a GitHub Actions workflow.
        BadKey: the signing key is not an unencrypted minisign secret key.
        PackError: a step failed.
    """
    found = signing_key(path=settings.signing_key_file, content=settings.signing_key)
    if found is None and not unsigned:
        raise UsageError(f"no signing key: set {ENV_KEY_FILE} to a minisign secret key file, or {ENV_KEY} to its "
                         f"content (make a pair with ci/keygen DIR or minisign -G -W); --unsigned packs "
                         f"without signatures")
    if found is not None and unsigned:
        raise UsageError(f"--unsigned, and a signing key is given in {found[1]}: leave out one of them")
    identity = attesting_workflow(settings) if attested else None
    _check_out(out)
    key = found[0] if found is not None else None
    with tempfile.TemporaryDirectory(prefix="superfluid-pack-") as tmp:
        stage = Path(tmp) / "dist"
        sdist, wheel = _build(source, stage, _child_env(settings.environment))
        work = Path(tmp) / "venv-check"
        work.mkdir()
        doc = compat_of_wheel(wheel, work, settings.environment)  # it makes its own child's environment
        _check_version(doc, wheel)
        timestamp = _timestamp(settings.source_date_epoch)
        staged = [p for artifact in (sdist, wheel)
                  for p in [artifact, *_sidecars(artifact, doc, key, timestamp, identity)]]
        out.mkdir(parents=True, exist_ok=True)
        moved = []
        for path in staged:
            target = out / path.name
            shutil.move(str(path), target)
            moved.append(target)
    return Packed((out / sdist.name, out / wheel.name), tuple(moved), key.id if key is not None else None)


def _parser() -> argparse.ArgumentParser:
    p = ManifestParser(prog=_PROG, description="Build the sdist and the wheel into DIR, each with its .sha256, its "
                                         ".compat.json and that document's minisign signature (.minisig).")
    p.epilog = ("The release workflow then attests each artifact and its .compat.json "
                "(actions/attest-build-provenance) and uploads each one's Sigstore bundle beside it as "
                "<file>.sigstore.json: docs/release.md, \"Attestations\".")
    p.add_argument("--out", required=True, metavar="DIR", help="an empty (or new) directory to write into")
    p.add_argument("--unsigned", action="store_true",
                   help=f"write no signatures (a release needs them: give the key in {ENV_KEY_FILE} or {ENV_KEY})")
    p.add_argument("--attested", action="store_true",
                   help=f"the GitHub Actions workflow running this attests the files it writes "
                        f"(actions/attest-build-provenance): each .compat.json states that workflow "
                        f"({ENV_WORKFLOW_REF}) as release.attested_by")
    p.add_argument("--source", metavar="DIR", default=".", help="the project to build (default: the current one)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``ci/pack``: 0 written; 1 a step failed; 2 a usage error (nothing was built)."""
    return guarded(_PROG, lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    packed = pack(Path(args.source).resolve(), Path(args.out).resolve(), read_settings(os.environ),
                  unsigned=args.unsigned, attested=args.attested)
    note = f"signed with key {packed.key_id}" if packed.key_id is not None else \
        "--unsigned: no .minisig was written; these files are not a release"
    return report_written(_PROG, note, packed.files)


if __name__ == "__main__":
    sys.exit(main())
