"""Which runtime reads a model: the model formats each adapter declares, matched against a path."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["PathFacts", "facts_of", "match", "claim", "describe", "words", "reads", "MAGIC_BYTES"]

#: bytes read from the start of a file to compare with the declared magic
MAGIC_BYTES = 16

Formats = Mapping[str, Sequence[Mapping[str, Any]]]


class PathFacts(NamedTuple):
    """What the rule reads of a path: its name, and its first bytes (a file) or its entries (a directory)."""

    name: str
    is_dir: bool
    head: bytes  # a file's first MAGIC_BYTES bytes (b"" for a directory, or an unreadable file)
    entries: tuple[str, ...]  # a directory's entry names (() for a file)


def facts_of(path: str) -> PathFacts:
    """The facts of ``path`` (an unreadable file reads as empty; a missing path as an empty file)."""
    name = os.path.basename(os.path.normpath(path))
    if os.path.isdir(path):
        try:
            entries = tuple(sorted(os.listdir(path)))
        except OSError:
            entries = ()
        return PathFacts(name, True, b"", entries)
    try:
        with open(path, "rb") as f:
            head = f.read(MAGIC_BYTES)
    except OSError:
        head = b""
    return PathFacts(name, False, head, ())


def _extension_of(name: str, extensions: Sequence[str]) -> bool:
    return any(name.lower().endswith("." + e.lower()) for e in extensions)


def match(fmt: Mapping[str, Any], facts: PathFacts) -> str | None:
    """How ``fmt`` claims the path: ``"magic"``, ``"extension"``, ``"directory"``, or None."""
    if facts.is_dir:
        spec = fmt.get("directory")
        if not isinstance(spec, Mapping):
            return None
        files = [str(f) for f in spec.get("files") or []]
        extensions = [str(e) for e in spec.get("extensions") or []]
        if all(f in facts.entries for f in files) and all(
                any(_extension_of(n, [e]) for n in facts.entries) for e in extensions):
            return "directory"
        return None
    spec = fmt.get("file")
    if not isinstance(spec, Mapping):
        return None
    magic = spec.get("magic")
    if isinstance(magic, str) and magic and facts.head.startswith(magic.encode("latin-1")):
        return "magic"
    if _extension_of(facts.name, [str(e) for e in spec.get("extensions") or []]):
        return "extension"
    return None


def claim(declared: Formats, facts: PathFacts) -> tuple[str, Mapping[str, Any]] | None:
    """The runtime id and format that read the path (see the module's rule), or None.

    ``declared`` maps each runtime id to its formats, in the registry's order.
    """
    ranked: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for runtime_id, formats in declared.items():
        for fmt in formats:
            how = match(fmt, facts)
            if how is not None and how not in ranked:
                ranked[how] = (runtime_id, fmt)
    for how in ("directory", "magic", "extension"):
        if how in ranked:
            return ranked[how]
    return None


def _one(fmt: Mapping[str, Any]) -> str:
    what = str(fmt.get("describe") or fmt.get("id"))
    file, directory = fmt.get("file"), fmt.get("directory")
    if isinstance(file, Mapping):
        marks = []
        if file.get("magic"):
            marks.append(f"starts with {file['magic']}")
        if file.get("extensions"):
            marks.append("/".join("." + e for e in file["extensions"]))
        return f"{what} ({', or '.join(marks)})" if marks else what
    if isinstance(directory, Mapping):
        holds = [*(directory.get("files") or []), *("*." + e for e in directory.get("extensions") or [])]
        return f"{what} (holding {', '.join(holds)})" if holds else what
    return what


def describe(declared: Formats) -> str:
    """The formats known, for a message: ``llamacpp reads a GGUF file (starts with GGUF, or .gguf); ...``."""
    parts = []
    for runtime_id, formats in declared.items():
        if formats:
            parts.append(f"{runtime_id} reads " + " or ".join(_one(f) for f in formats))
    return "; ".join(parts) or "no runtime declares a model format"


def words(formats: Sequence[Mapping[str, Any]]) -> str:
    """What a runtime reads, in words (its check's ``reads``, a ``runtimes`` row's): its formats'
    ``describe``, the last joined by "or" (``a GGUF file``; ``a baseRT model file or a GGUF file``)."""
    said = [str(f.get("describe") or f.get("id")) for f in formats]
    if not said:
        return "no model format"
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"


def reads(formats: Sequence[Mapping[str, Any]], path: str) -> str | None:
    """Why a runtime declaring ``formats`` does not read ``path`` by its formats alone (nothing is
    loaded): the path is missing, or no format claims it; None when one does. The gate a runtime's
    ``check --model`` passes first, and what ``superfluid runtimes <model>`` says of a runtime
    that is not ready."""
    if not os.path.lexists(path):
        return f"{path}: no such file or directory"
    facts = facts_of(path)
    if any(match(f, facts) is not None for f in formats):
        return None
    return f"it reads {words(formats)}, and {path} is not one"
