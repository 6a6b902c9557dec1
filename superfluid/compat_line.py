"""What ``compat`` and its ``--release`` form share: the flags they refuse, and a compat document as
both print it (docs/cli.md, "`superfluid compat`")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid.manifest.compat import unknown_runtimes
from superfluid.paths import flag_path
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.output import error_doc, print_json, table

if TYPE_CHECKING:
    from superfluid.manifest.verdict import DocumentVerdict

__all__ = ["key_flags", "refuse_service_flags", "compat_text", "verdict_text", "show_document"]


def key_flags(args: argparse.Namespace) -> list[str]:
    """``--key`` files, each checked to exist before anything is fetched (exit 2 when not)."""
    keys: list[str] = list(getattr(args, "key", None) or [])
    if (keys or getattr(args, "require_signature", False)) and not args.release:
        raise UsageError("--key and --require-signature go with --release FILE|URL (see 'superfluid compat --help')")
    for path in keys:
        flag_path(path, "--key", "public key file")
    if args.release and "://" not in args.release:
        flag_path(args.release, "--release", "compat document file")
    return keys


def refuse_service_flags(args: argparse.Namespace) -> None:
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


def verdict_text(verdict: DocumentVerdict) -> str:
    """The verdict's lines under the document's tables."""
    line = f"signature: {verdict.text}"
    if verdict.signature == "verified":
        line += f" ({verdict.key_source}); trusted comment: {verdict.trusted_comment}"
    tarball = {"checked": "its SHA-256 checked", "absent": "not beside the document, not checked",
               "unnamed": "none named"}[verdict.tarball]
    return f"{line}\ntarball: {tarball}\n"


def show_document(doc: dict[str, Any], verdict: DocumentVerdict | None, failed: Mapping[str, str], *,
                  as_json: bool) -> None:
    """The document on stdout: JSON (with its verification, the runtimes this superfluid does not
    ship, and the error of the runtimes that gave no answer), or its tables and verdict."""
    if as_json:
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
