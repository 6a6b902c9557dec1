"""Compat documents: build one from the adapters' declarations, validate one read from elsewhere."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from superfluid.installer.trust.identity import Identity
from superfluid.manifest.release_files import file_sha256
from superfluid.runtime.kernel import schema
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.registry import IDS

__all__ = ["SCHEMA_TAG", "SCHEMA_NAME", "ATTESTED_BY", "release_info", "build", "validate", "parse", "with_tarball",
           "with_attestation", "attested_by", "unknown_runtimes"]

SCHEMA_TAG = "superfluid-compat/1"
SCHEMA_NAME = "compat"
#: the key of ``release`` naming the workflow that attests the release's files (ci/pack --attested)
ATTESTED_BY = "attested_by"
_TAG = re.compile(r"^superfluid-compat/(\d+)(?:\.(\d+))?$")


def release_info(name: str, version: str, *, tarball: str | None = None,
                 sha256: str | None = None) -> dict[str, Any]:
    """The ``release`` object; ``tarball`` and ``sha256`` stay null until the pack step fills them."""
    return {"name": name, "version": version, "tarball": tarball, "sha256": sha256}


def build(release: Mapping[str, Any], parts: Mapping[str, Mapping[str, Any]], *,
          unanswered: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The merged document: each runtime's part under its id, in the order of ``parts``."""
    doc: dict[str, Any] = {"schema": SCHEMA_TAG, "release": dict(release),
                           "runtimes": {rid: dict(part) for rid, part in parts.items()}}
    if unanswered:
        doc["unanswered"] = dict(unanswered)
    return doc


def validate(doc: Any, where: str, *, once: bool = False) -> dict[str, Any]:
    """Check a compat document; the document.

    A ``schema`` tag of another major version is refused before the schema is applied (its shape
    may differ in any way); a minor version only adds keys and is read. ``once``: the schema check is
    skipped for a document of the same content that passed it before, in this installation
    (``schema.validate_once``; for the document this release merges from what it ships, on every
    ``superfluid compat``).

    Raises:
        BadFile: not an object, no ``schema`` tag, a major we do not know, or a schema violation
            (names ``where`` and the JSON path at fault).
    """
    if not isinstance(doc, dict):
        raise BadFile(where, "is not a compat document (a JSON object)")
    tag = doc.get("schema")
    m = _TAG.match(tag) if isinstance(tag, str) else None
    if m is None:
        raise BadFile(where, f"has no compat schema tag (expected {SCHEMA_TAG!r}, got {tag!r})",
                      json_path="$.schema")
    if m.group(1) != "1":
        raise BadFile(where, f"is a compat document of schema {tag!r}; this superfluid reads {SCHEMA_TAG}",
                      json_path="$.schema", advice="update superfluid to read it")
    if once:
        schema.validate_once(doc, json.dumps(doc, sort_keys=True).encode(), SCHEMA_NAME, where, shipped=True)
        return doc
    schema.validate(doc, SCHEMA_NAME, where)
    return doc


def parse(text: str | bytes, where: str) -> dict[str, Any]:
    """Parse and validate a compat document read from ``where``.

    Raises:
        BadFile: not JSON, or as ``validate``.
    """
    try:  # a hostile document is refused by size, depth and encoding too (runtime/jsonread)
        doc = loads(text, max_bytes=max(len(text), 1))
    except UntrustedJson as e:
        raise BadFile(where, f"is not JSON ({e.fault})") from None
    except RecursionError:  # [[[[...]]]] deeper than the parser's stack
        raise BadFile(where, "is not JSON (nested too deeply to be a compat document)") from None
    return validate(doc, where)


def unknown_runtimes(doc: Mapping[str, Any]) -> list[str]:
    """The runtime ids of ``doc`` that this superfluid does not ship, in the document's order."""
    runtimes = doc.get("runtimes")
    return [str(r) for r in runtimes if r not in IDS] if isinstance(runtimes, Mapping) else []


def with_tarball(doc: Mapping[str, Any], tarball: str) -> dict[str, Any]:
    """A copy of ``doc`` whose release names ``tarball`` (its file name) and its SHA-256.

    Raises:
        BadFile: the tarball cannot be read.
    """
    try:
        digest = file_sha256(tarball)
    except OSError as e:
        raise BadFile(tarball, f"cannot be read ({e.strerror or e})") from None
    out = dict(doc)
    out["release"] = {**dict(doc.get("release") or {}), "tarball": os.path.basename(tarball), "sha256": digest}
    return out


def with_attestation(doc: Mapping[str, Any], attested: Identity) -> dict[str, Any]:
    """A copy of ``doc`` whose release states ``attested``: the workflow run that attests the release's
    files (``actions/attest-build-provenance``), as the pack step run by it writes it."""
    out = dict(doc)
    out["release"] = {**dict(doc.get("release") or {}), ATTESTED_BY: attested.to_json()}
    return out


def attested_by(doc: Mapping[str, Any], where: str) -> Identity | None:
    """The workflow a compat document states its release's files were attested by, or None when it
    states none. A document's word under its signature: the bundles beside the files prove it.

    Raises:
        BadFile: it states one of another shape (names ``where`` and the JSON path).
    """
    release = doc.get("release")
    stated = release.get(ATTESTED_BY) if isinstance(release, Mapping) else None
    if stated is None:
        return None
    try:
        found = Identity.from_json(stated)
    except ValueError as e:
        raise BadFile(where, f"states an attestation identity that is not one ({e})",
                      json_path=f"$.release.{ATTESTED_BY}") from None
    if found.workflow is None or found.ref is None:
        raise BadFile(where, "states an attestation identity without its workflow or ref",
                      json_path=f"$.release.{ATTESTED_BY}")
    return found
