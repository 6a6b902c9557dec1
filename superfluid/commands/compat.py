"""``superfluid compat [--json] [--release FILE|URL]``: what this release drives (SPEC §5.2, §6.2).

Without ``--release``: every adapter this release ships is asked for its part (the worker named by
``SUPERFLUID_WORKER_<ID>`` first, else basert's linked adapter in process, else the runtime's
worker, in a scrubbed environment with a timeout) and the parts are merged into one compat
document, validated against ``schemas/compat.schema.json``. A runtime whose worker fails, hangs or
answers something that is not its compat part is named on stderr with the reason, listed under
``unanswered``, and the others still answer; the document is then incomplete and the command exits
1 (so a release pipeline never publishes it).

With ``--release``: read another release's compat document (a file, or an ``http(s)`` URL fetched
through the installer's fetcher), validate it and print it. Its signature (``.minisig``) is not
verified yet.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from superfluid import __version__, catalog
from superfluid.output import print_json, table
from superfluid.runtime import registry
from superfluid.runtime.errors import BadFile, WorkerFailed

__all__ = ["run", "gather", "read_release", "compat_text", "RELEASE_NAME"]

#: the name this toolchain's release carries in its compat document
RELEASE_NAME = "superfluid-toolchain"
#: bytes a compat document read with --release may have
_MAX_BYTES = 4 << 20


def _part_fault(runtime_id: str, part: Any) -> str | None:
    """Why a runtime's answer is not a compat part, or None (checked against the schema)."""
    from superfluid.manifest.compat import build, release_info
    from superfluid.runtime.schema import errors

    if not isinstance(part, dict):
        return "answered `compat --json` with something other than a JSON object"
    found = errors(build(release_info(RELEASE_NAME, __version__), {runtime_id: part}), "compat")
    if found:
        return f"its `compat --json` answer does not match the compat schema ({found[0]})"
    return None


def gather(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every shipped runtime's compat part; (parts by id, reasons by id of those that gave none)."""
    parts: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for runtime_id in registry.IDS:
        try:
            part, _, ref = catalog.answer(runtime_id, ["compat", "--json"], environ, accept=(0,))
        except WorkerFailed as e:
            failed[runtime_id] = str(e)
            continue
        fault = _part_fault(runtime_id, part)
        if fault is not None:
            who = os.path.basename(ref.path) if ref else f"the linked {runtime_id} adapter"
            failed[runtime_id] = f"worker {who}: {fault}"
            continue
        parts[runtime_id] = part
    return parts, failed


def read_release(source: str) -> dict[str, Any]:
    """Read and validate another release's compat document from a file or an ``http(s)`` URL.

    Raises:
        BadFile: unreadable, not JSON, a schema major we do not know, or not a compat document.
        DownloadError: the URL could not be fetched.
    """
    from superfluid.manifest.compat import parse

    if source.startswith(("https://", "http://")):
        from superfluid.installer.fetcher import RequestsFetcher

        fetcher = RequestsFetcher(plain_http_origins=[source])  # the user named it: http is theirs to choose
        try:
            _, body = fetcher.get_bytes(source, max_bytes=_MAX_BYTES)
        finally:
            fetcher.close()
        return parse(body, source)
    try:
        with open(source, "rb") as f:
            body = f.read(_MAX_BYTES + 1)
    except OSError as e:
        raise BadFile(source, f"cannot be read ({e.strerror or e})",
                      fix="name a compat.json file or an https:// URL with --release") from None
    if len(body) > _MAX_BYTES:
        raise BadFile(source, f"is larger than {_MAX_BYTES} bytes; not a compat document")
    return parse(body, source)


def _runtime_text(runtime_id: str, part: Mapping[str, Any]) -> str:
    lines: list[str] = []
    if "requires" in part:
        req = part["requires"]
        line = part.get("unnumbered_line")
        lines.append(f"{runtime_id}: drives baseRT ABI {req.get('abi')} (header {req.get('header')})"
                     + (f"; unnumbered libraries of the {line} line too" if line else ""))
        rows = [[i.get("version", "?"), "unnumbered" if i.get("abi") is None else str(i["abi"]),
                 ", ".join(i.get("platforms") or []) or "-"] for i in part.get("installs") or []]
        if rows:
            lines.append(_indent(table(["INSTALLS", "ABI", "PLATFORMS"], rows)))
    elif "tested" in part:
        lines.append(f"{runtime_id}: built and tested against these llama.cpp builds")
        rows = [[t.get("build", "?"), t.get("layout", "?"), t.get("published") or "-"] for t in part["tested"]]
        lines.append(_indent(table(["BUILD", "LAYOUT", "PUBLISHED"], rows)))
    elif "installs" in part:
        lines.append(f"{runtime_id}: installs on {', '.join(part.get('platforms') or []) or '-'}")
        rows = [[i.get("mlx", "?"), i.get("mlx_lm", "?"), i.get("python", "?")] for i in part["installs"]]
        lines.append(_indent(table(["MLX", "MLX-LM", "PYTHON"], rows)))
    else:
        lines.append(f"{runtime_id}:")
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


def run(args: argparse.Namespace) -> int:
    """0 the document is complete; 1 a runtime gave no answer, or --release could not be read."""
    from superfluid.manifest.compat import build, release_info, validate

    if args.release:
        doc = read_release(args.release)
        failed: dict[str, str] = {}
    else:
        environ = dict(os.environ)
        parts, failed = gather(environ)
        doc = build(release_info(RELEASE_NAME, __version__), parts, unanswered=failed)
        validate(doc, "superfluid compat")
    if args.json:
        print_json(doc)
    else:
        sys.stdout.write(compat_text(doc))
    for runtime_id, why in failed.items():
        sys.stderr.write(f"superfluid: {runtime_id} gave no compat answer: {why}\n")
    return 1 if failed else 0
