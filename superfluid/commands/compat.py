"""``superfluid compat``: what this release drives, or (``--release``) another release's verified document."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from superfluid import __version__, catalog
from superfluid.compat_line import key_flags, refuse_service_flags, show_document
from superfluid.manifest.compat import build, release_info, validate
from superfluid.parser import RUNTIME_IDS, Help, Parser, add_json, exits
from superfluid.release_flags import add_trust_flags
from superfluid.runtime import registry
from superfluid.runtime.kernel import schema
from superfluid.runtime.kernel.errors import BadFile, WorkerFailed
from superfluid.runtime.presentation import by_kind

__all__ = ["HELP", "arguments", "runs_in", "run", "gather", "RELEASE_NAME"]

HELP = Help(
    "what this release drives (or another release's compat.json)",
    "This release's compat document, merged from every adapter it ships; with --release, another "
    "release's compat.json read from a file or URL, its .minisig verified against the trusted keys "
    "(the package's, $SUPERFLUID_HOME/keys/*.pub, each --key) before it is read. With --service URL (or "
    "$SUPERFLUID_MANIFEST_URL) and --runtime: which superfluid releases drive an engine, newest first with "
    "why, asked of a compat manifest service or its static export (docs/manifest-service.md), each answer "
    "checked fresh against the service's TUF metadata from a root given once (--trust-root FILE or "
    "$SUPERFLUID_MANIFEST_ROOT; kept in $SUPERFLUID_HOME/trust): a rolled-back, frozen, mixed or forged index "
    "is refused; --insecure-no-freshness asks unchecked.",
    ("superfluid compat --json > superfluid.compat.json",
     "superfluid compat --release https://example.org/r/superfluid-0.2.0.compat.json --require-signature",
     "superfluid compat --service https://manifest.example.org --runtime basert --abi 2 --trust-root 1.root.json",
     "superfluid compat --service ./site --runtime llamacpp --build b11549 --platform linux-x64 --json"),
    exits(_0="the document is complete (or --release was read: verified, or unsigned with a warning; or "
             "--service answered)",
          _1="a runtime gave no answer, --release could not be read, verified or validated, or --service "
             "could not be asked or its answer was refused (a rollback, a freeze, mix-and-match, a forged "
             "or tampered index)"),
)
#: the commands that only read the home (see superfluid.cli)
READS_HOME = True

#: the name this toolchain's release carries in its compat document
RELEASE_NAME = "superfluid-toolchain"


def _part_fault(runtime_id: str, part: Any) -> str | None:
    """Why a runtime's answer is not a compat part, or None (checked against the schema)."""
    if not isinstance(part, dict):
        return "answered `compat --json` with something other than a JSON object"
    found = schema.errors(build(release_info(RELEASE_NAME, __version__), {runtime_id: part}), "compat")
    if found:
        return f"its `compat --json` answer does not match the compat schema ({found[0]})"
    return None


def _all_valid(answers: Mapping[str, Any]) -> bool:
    """Whether every answer is a compat part: the document of them all checked against the schema
    once per content (the same answers on every run cost no schema library)."""
    if not all(isinstance(part, dict) for part in answers.values()):
        return False
    doc = build(release_info(RELEASE_NAME, __version__), answers)
    try:
        # made from what this package ships: checked once per installation, not once per home
        schema.validate_once(doc, json.dumps(doc, sort_keys=True).encode(), "compat", "superfluid compat", shipped=True)
    except BadFile:
        return False
    return True


def gather(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every shipped runtime's compat part; (parts by id, reasons by id of those that gave none)."""
    parts: dict[str, Any] = {}
    failed: dict[str, str] = {}
    answers: dict[str, tuple[Any, Any]] = {}
    for runtime_id in registry.IDS:
        try:
            part, _, ref = catalog.answer(runtime_id, ["compat", "--json"], environ, accept=(0,))
        except WorkerFailed as e:
            failed[runtime_id] = str(e)
            continue
        answers[runtime_id] = (part, ref)
    if _all_valid({runtime_id: part for runtime_id, (part, _) in answers.items()}):
        return {runtime_id: part for runtime_id, (part, _) in answers.items()}, failed
    for runtime_id, (part, ref) in answers.items():
        fault = _part_fault(runtime_id, part)
        if fault is not None:
            who = os.path.basename(ref.path) if ref else f"the linked {runtime_id} adapter"
            failed[runtime_id] = f"worker {who}: {fault}"
            continue
        parts[runtime_id] = part
    return parts, failed


def arguments(p: Parser) -> None:
    add_json(p)
    p.add_argument("--release", metavar="FILE|URL", help="read and verify another release's compat.json")
    p.add_argument("--key", action="append", metavar="FILE", help="also trust this minisign public key (repeatable)")
    p.add_argument("--require-signature", action="store_true", help="refuse a --release document with no signature")
    p.add_argument("--service", metavar="URL", help="ask this compat manifest service (or static export) which "
                   "releases drive an engine (or SUPERFLUID_MANIFEST_URL)")
    p.add_argument("--runtime", metavar="ID", help=f"the engine asked about with --service: {RUNTIME_IDS}")
    _question_flags(p)
    p.add_argument("--platform", metavar="P", help="with --service: on this platform (e.g. linux-x64)")
    add_trust_flags(p)


def _question_flags(p: argparse.ArgumentParser) -> None:
    """``--<kind> V`` for each kind of question the adapters are asked (``--service``), in name order, with
    what it names of each runtime asked it (``Presentation.questions``)."""
    for kind, asked in by_kind(map(registry.presentation, registry.IDS)).items():
        p.add_argument(f"--{kind}", dest=f"ask_{kind}", metavar=asked[0][1].metavar,
                       help="; ".join(f"--runtime {shown.id}: {q.flag}" for shown, q in asked))


def runs_in(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """``compat_service`` when the line asks a manifest service (``--service``, ``--runtime``): which
    releases drive an engine; ``compat_release`` for another release's document (``--release``);
    None: this release's document, ``run``. A plain ``compat`` loads neither the service's client nor
    the signature checks (issue 42, item 32)."""
    if args.service or args.runtime:
        return "compat_service"
    return "compat_release" if args.release else None


def run(args: argparse.Namespace) -> int:
    """0 the document is complete; 1 a runtime gave no answer; 2 a bad flag."""
    refuse_service_flags(args)
    key_flags(args)  # --key and --require-signature without --release: a usage error
    parts, failed = gather(dict(os.environ))
    doc = build(release_info(RELEASE_NAME, __version__), parts, unanswered=failed)
    validate(doc, "superfluid compat", once=True)
    show_document(doc, None, failed, as_json=args.json)
    for runtime_id, why in failed.items():
        sys.stderr.write(f"superfluid: {runtime_id} gave no compat answer: {why}\n")
    return 1 if failed else 0
