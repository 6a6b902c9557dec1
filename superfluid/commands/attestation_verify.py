"""``superfluid attestation verify FILE --bundle BUNDLE --repo OWNER/NAME``: which GitHub Actions workflow built a
file, proven by its Sigstore bundle, offline, as ``gh attestation verify`` checks it. See docs/install.md, "Provenance".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from superfluid.installer.cache.blobs import sha256_file
from superfluid.installer.trust.provenance import (
    ROOT_VARIABLE,
    Identity,
    Provenance,
    Root,
    identity,
    load_root,
    read_bundle,
    verify,
)
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.paths import flag_path
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.output import print_json

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "prove which workflow built a file",
    "Verify FILE against its Sigstore bundle (a GitHub artifact attestation, as actions/attest-build-provenance "
    "makes it, or a signature as sigstore sign makes it), offline: the certificate chains to the trusted root at "
    "the time the transparency log recorded it, the log entry is in the log, the bundle signs FILE's sha256, and "
    "the certificate was issued to a GitHub Actions workflow of --repo (and --workflow, --ref when given). The "
    "trusted root is the public Sigstore's, as the installed sigstore-python carries it, unless --trust-root or "
    f"{ROOT_VARIABLE} names another (a private Sigstore).",
    ("superfluid attestation verify llama-b6000-bin-ubuntu-x64.zip --bundle llama-b6000-bin-ubuntu-x64.zip.sigstore"
     ".json --repo ggml-org/llama.cpp --workflow .github/workflows/release.yml --ref 'refs/tags/*'",
     "superfluid attestation verify dist/superfluid-0.1.0.tar.gz --bundle attestation.json --repo OWNER/NAME --json"),
    exits(_0="verified: the identity proven is printed",
          _1="refused: the bundle does not prove it (another repository, workflow or ref, other bytes, a log entry "
             "or certificate that does not verify, an untrusted root), or cannot be read (too large, nested too "
             "deep, not a bundle)",
          _2="usage: a bad flag, FILE or BUNDLE missing or not a regular file (a directory, a FIFO), a --repo "
             "that is not OWNER/NAME"),
)


def arguments(p: Parser) -> None:
    p.add_argument("file", metavar="FILE", help="the file the bundle is for")
    p.add_argument("--bundle", metavar="FILE", required=True,
                   help="its Sigstore bundle (JSON, as <asset>.sigstore.json)")
    p.add_argument("--repo", metavar="OWNER/NAME", required=True,
                   help="the GitHub repository whose workflow must have signed it")
    p.add_argument("--workflow", metavar="WORKFLOW",
                   help="the workflow file that must have signed it (.github/workflows/release.yml; a bare "
                        "release.yml is one under .github/workflows/); default any workflow of --repo")
    p.add_argument("--ref", metavar="REF",
                   help="the ref the run must have built (refs/tags/v1.2.0; * matches anything: 'refs/tags/*' is "
                        "any tag); default any ref")
    p.add_argument("--trust-root", metavar="FILE",
                   help=f"a Sigstore trusted root (trusted_root.json) to verify under instead of the public "
                        f"Sigstore's (or {ROOT_VARIABLE})")
    add_json(p)


def _wanted(args: argparse.Namespace) -> Identity:
    try:
        return identity(args.repo, args.workflow, args.ref)
    except ValueError as e:
        flag = {"repository": "--repo", "workflow": "--workflow"}.get(str(e).split(" ", 1)[0], "--ref")
        raise UsageError(f"{flag}: {e}") from None


def _root_path(args: argparse.Namespace) -> str | None:
    """The trusted root named (``--trust-root``, else the variable), checked as a path (exit 2)."""
    if args.trust_root:
        return str(flag_path(args.trust_root, "--trust-root", "trusted root file"))
    named = os.environ.get(ROOT_VARIABLE, "").strip()
    return str(flag_path(named, ROOT_VARIABLE, "trusted root file")) if named else None


def _document(file: str, sha256: str, bundle: str, root: Root, wanted: Identity,
              proven: Provenance) -> dict[str, Any]:
    """What ``--json`` prints (schema ``attestation-verify``)."""
    return {"file": file, "sha256": sha256, "bundle": bundle, "trust_root": root.where, "wanted": wanted.to_json(),
            "provenance": proven.to_json()}


def _text(file: str, proven: Provenance) -> str:
    """The identity proven, one fact a line."""
    logged = f"{proven.log_index}" + (f" at {proven.integrated_time}" if proven.integrated_time else "")
    rows = [("repository", proven.repository), ("workflow", proven.workflow), ("ref", proven.ref),
            ("commit", proven.commit), ("run", proven.run_url),
            *((("statement", proven.predicate_type),) if proven.predicate_type else ()),
            ("log entry", logged), ("bundle", f"sha256:{proven.bundle_sha256}")]
    return f"{file}: verified: built by {proven.signer}\n" + "".join(f"  {k:<10}  {v}\n" for k, v in rows)


def run(args: argparse.Namespace) -> int:
    """``attestation verify``.

    Raises:
        UsageError: a bad flag; FILE, --bundle or --trust-root missing or not a regular file (exit 2).
        ProvenanceRefused: the bundle does not prove FILE was built by the workflow asked (exit 1).
        BadFile: the trusted root cannot be read or is none (exit 1).
    """
    wanted = _wanted(args)
    file = str(flag_path(args.file, "", "file"))
    bundle = str(flag_path(args.bundle, "--bundle", "Sigstore bundle"))
    root = load_root(_root_path(args))
    data = read_bundle(bundle)
    try:
        sha256 = sha256_file(Path(file))
    except OSError as e:
        raise BadFile(file, f"cannot be read ({e.strerror or e})") from None
    proven = verify(sha256, data, wanted, root, named=bundle, subject=file)
    if args.json:
        print_json(_document(file, sha256, bundle, root, wanted, proven))
    else:
        sys.stdout.write(_text(file, proven))
    return 0
