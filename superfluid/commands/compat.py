"""``superfluid compat``: what this release drives, or (``--release``) another release's verified document."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid import __version__, catalog
from superfluid.manifest.compat import build, release_info, unknown_runtimes, validate
from superfluid.parser import RUNTIME_IDS, Help, Parser, add_json, exits
from superfluid.paths import flag_path
from superfluid.release_document import read_release
from superfluid.release_flags import add_trust_flags
from superfluid.runtime import registry
from superfluid.runtime.kernel import schema
from superfluid.runtime.kernel.errors import BadFile, UsageError, WorkerFailed
from superfluid.runtime.kernel.output import error_doc, print_json, table
from superfluid.runtime.presentation import by_kind

if TYPE_CHECKING:
    from superfluid.manifest.verdict import DocumentVerdict

__all__ = ["HELP", "arguments", "runs_in", "run", "gather", "compat_text", "verdict_text", "RELEASE_NAME"]

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


def verdict_text(verdict: DocumentVerdict) -> str:
    """The verdict's lines under the document's tables."""
    line = f"signature: {verdict.text}"
    if verdict.signature == "verified":
        line += f" ({verdict.key_source}); trusted comment: {verdict.trusted_comment}"
    tarball = {"checked": "its SHA-256 checked", "absent": "not beside the document, not checked",
               "unnamed": "none named"}[verdict.tarball]
    return f"{line}\ntarball: {tarball}\n"


def _key_flags(args: argparse.Namespace) -> list[str]:
    """``--key`` files, each checked to exist before anything is fetched (exit 2 when not)."""
    keys: list[str] = list(getattr(args, "key", None) or [])
    if (keys or getattr(args, "require_signature", False)) and not args.release:
        raise UsageError("--key and --require-signature go with --release FILE|URL (see 'superfluid compat --help')")
    for path in keys:
        flag_path(path, "--key", "public key file")
    if args.release and "://" not in args.release:
        flag_path(args.release, "--release", "compat document file")
    return keys


def _refuse_service_flags(args: argparse.Namespace) -> None:
    """A flag of the service's question without ``--runtime``/``--service`` is a usage error, not
    silently this release's document."""
    given = [f"--{k[len('ask_'):]}" for k, v in sorted(vars(args).items()) if k.startswith("ask_") and v]
    given += [flag for flag, dest in (("--platform", "platform"), ("--trust-root", "trust_root"),
                                      ("--insecure-no-freshness", "insecure_no_freshness"))
              if getattr(args, dest, None)]
    if given:
        raise UsageError(f"{given[0]} goes with --runtime ID --service URL (which releases drive an engine); "
                         f"without them, compat prints this release's document (see 'superfluid "
                         f"compat --help')")


def _runtime_text(runtime_id: str, part: Mapping[str, Any]) -> str:
    lines: list[str] = []
    if runtime_id not in registry.IDS:
        lines.append(f"{runtime_id}: unknown (a runtime this superfluid does not ship; kept as the document "
                     f"gives it: {', '.join(map(str, part)) or 'empty'})")
        return "\n".join(lines) + "\n"
    shown = registry.presentation(runtime_id).shown(part)  # what the part means is its engine's to say
    lines.append(shown.line)
    if shown.rows:
        lines.append(_indent(table(shown.header, shown.rows)))
    names = [o.get("name", "?") for o in part.get("options") or [] if isinstance(o, dict)]
    lines.append(f"  options: {', '.join(names) if names else 'none'}")
    return "\n".join(lines) + "\n"


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines()).rstrip("\n")


def compat_text(doc: Mapping[str, Any]) -> str:
    """A short table per runtime, under the release line."""
    release = doc.get("release") or {}
    head = f"{release.get('name')} {release.get('version')} ({doc.get('schema')})"
    if release.get("tarball"):
        head += f", {release['tarball']} sha256 {release.get('sha256')}"
    blocks = [head + "\n"]
    for runtime_id, part in (doc.get("runtimes") or {}).items():
        blocks.append(_runtime_text(runtime_id, part))
    for runtime_id, why in (doc.get("unanswered") or {}).items():
        blocks.append(f"{runtime_id}: no answer: {why}\n")
    return "\n".join(blocks)


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
    releases drive an engine; None: this release's document, or ``--release``'s, ``run``. A plain
    ``compat`` never loads the service's client (issue 42, item 32)."""
    return "compat_service" if args.service or args.runtime else None


def run(args: argparse.Namespace) -> int:
    """0 the document is complete (or --release was read: verified, or unsigned with a warning); 1 a
    runtime gave no answer, or --release could not be read or verified; 2 a bad flag."""
    _refuse_service_flags(args)
    keys = _key_flags(args)
    verdict: DocumentVerdict | None = None
    if args.release:
        doc, verdict, _ = read_release(args.release, keys=keys, require_signature=args.require_signature)
        failed: dict[str, str] = {}
    else:
        environ = dict(os.environ)
        parts, failed = gather(environ)
        doc = build(release_info(RELEASE_NAME, __version__), parts, unanswered=failed)
        validate(doc, "superfluid compat", once=True)
    if args.json:
        shown = {**doc} if verdict is None else {**doc, "verification": verdict.to_json()}
        unknown = unknown_runtimes(doc)
        if unknown:
            shown["unknown_runtimes"] = unknown
        if failed:
            shown.update(error_doc("unanswered", f"no compat answer from {', '.join(failed)}: the document "
                                   f"is incomplete and must not be published", 1))
        print_json(shown)
    else:
        sys.stdout.write(compat_text(doc))
        if verdict is not None:
            sys.stdout.write("\n" + verdict_text(verdict))
    if verdict is not None and verdict.signature == "unsigned":
        sys.stderr.write(f"superfluid: warning: {args.release} is unsigned (no .minisig beside it): its content "
                         f"is not verified; --require-signature refuses it\n")
    for runtime_id, why in failed.items():
        sys.stderr.write(f"superfluid: {runtime_id} gave no compat answer: {why}\n")
    return 1 if failed else 0
