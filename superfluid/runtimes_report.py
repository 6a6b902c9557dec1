"""What ``superfluid runtimes`` answers as upstream's report does, and each runtime's verdict on a model.

See docs/host-contract.md, "5. The answers a host reads".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid import catalog
from superfluid.runtime import registry
from superfluid.runtime.kernel import formats
from superfluid.runtime.kernel.errors import WorkerFailed
from superfluid.runtime.kernel.output import gb, table

__all__ = ["FIXES", "public", "declared", "reads_cell", "device_cell", "facts_line", "verdict", "model_answer",
           "CAPABILITY_LINES"]

#: the key of a ``runtimes`` row that holds its fixes as values (``Fix``), for the text; never printed as JSON
#: (nor any other key that starts with ``_``)
FIXES = "_fixes"

#: the lines under "<id> serves it": what is said, and where in the static capability record
CAPABILITY_LINES = (
    ("images", "modalities", "image_encode"),
    ("audio", "modalities", "gemma_audio_encode"),
    ("speech to text", "workload", "speech_to_text"),
    ("embeddings", "workload", "embedding"),
    ("grammar", "sampling", "grammar"),
    ("speculation", "serving", "multi_row_verification"),
    ("lossy parking", "serving", "park_lossy"),
    ("KV bits", "load", "kv_bits"),
)


def public(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` as ``--json`` prints it: without ``FIXES`` (its ``fix`` and ``fixes`` say them) or another
    key of the text's (``_``...)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


def _library_tokenizer(name: str, worker: Mapping[str, Any] | None) -> str | None:
    """The tokenizer library ``lib<name>.so`` (or ``.dylib``) beside the worker or in ``../lib``, if there."""
    path = worker.get("path") if isinstance(worker, Mapping) and worker.get("source") != "linked" else None
    if not isinstance(path, str):
        return None
    here = os.path.dirname(path)
    for folder in (here, os.path.join(os.path.dirname(here), "lib")):
        for suffix in (".so", ".dylib"):
            candidate = os.path.join(folder, f"lib{name}{suffix}")
            if os.path.isfile(candidate):
                return candidate
    return None


def _said(report: Mapping[str, Any], key: str, kind: type, declared: Any) -> Any:
    """``report[key]`` when it is of ``kind``, else ``declared``."""
    value = report.get(key)
    return value if isinstance(value, kind) else declared


def declared(runtime_id: str, report: Any, *, ready: bool, worker: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keys of a ``runtimes`` row that say what the runtime is, as upstream's report has them:
    ``aliases``, ``formats``, ``reads`` (the formats in words), ``tokenizer_source``,
    ``capabilities`` (its static record, ``{}`` when none) and, for a library tokenizer of a ready
    runtime found beside its worker, ``tokenizer`` (the library's path). Each is the check report's
    when it has it (a worker named by ``SUPERFLUID_WORKER_<ID>`` speaks for itself), else the
    adapter's declaration."""
    said: Mapping[str, Any] = report if isinstance(report, Mapping) else {}
    runtime = _said(said, "runtime", Mapping, {})
    facts = registry.get(runtime_id).model_facts()
    aliases: list[str] = _said(runtime, "aliases", list, registry.aliases_of(runtime_id))
    found: list[dict[str, Any]] = _said(said, "formats", list, facts.formats)
    tokenizer: Mapping[str, Any] = _said(said, "tokenizer", Mapping, facts.tokenizer)
    record: Mapping[str, Any] = _said(said, "capabilities", Mapping, facts.capabilities)
    out: dict[str, Any] = {"aliases": list(aliases), "formats": [dict(f) for f in found],
                           "reads": formats.words(found), "tokenizer_source": dict(tokenizer),
                           "capabilities": dict(record)}
    if ready and tokenizer.get("from") == "library" and isinstance(tokenizer.get("name"), str):
        library = _library_tokenizer(tokenizer["name"], worker)
        if library is not None:
            out["tokenizer"] = library
    return out


def reads_cell(row: Mapping[str, Any]) -> str:
    """The READS cell: the ids of the formats it reads, comma-joined (``gguf``), or ``-``."""
    return ",".join(str(f.get("id")) for f in row.get("formats") or [] if isinstance(f, Mapping)) or "-"


def device_cell(row: Mapping[str, Any]) -> str:
    """The DEVICE cell: its first device as ``<backend>: <name>, <GB>``, or ``-``."""
    devices = row.get("devices") or []
    if not devices:
        return "-"
    d = devices[0]
    return f"{d.get('backend', '?')}: {d.get('name', '?')}, {gb(d.get('memory'))}"


def facts_line(facts: Mapping[str, Any]) -> str:
    """What a runtime that reads the model says of it, in one cell: its architecture, then its
    sampling defaults (``qwen3; sampling defaults: temperature 0.6``)."""
    parts = []
    if isinstance(facts.get("architecture"), str) and facts["architecture"]:
        parts.append(facts["architecture"])
    defaults = facts.get("sampling_defaults")
    if isinstance(defaults, Mapping) and defaults:
        parts.append("sampling defaults: " + ", ".join(f"{k} {v}" for k, v in defaults.items()))
    return "; ".join(parts)


def verdict(row: Mapping[str, Any], model: str, environ: Mapping[str, str]) -> tuple[bool | str, dict[str, Any] | None]:
    """Whether the runtime of ``row`` reads ``model`` (true, or why not) and the facts it reports of
    it: by its formats alone first (no worker starts for a model of another format), then, when the
    runtime is ready, by its check with ``--model`` (a runtime that is not ready reads nothing).
    """
    gate = formats.reads(row.get("formats") or [], model)
    if gate is not None:
        return gate, None
    if row.get("ready") is not True:
        state = row.get("state")
        word = "" if state in ("not installed", "missing") else f" {state},"  # an install's verdict: its word
        return f"not read: the {row['id']} runtime is{word} not ready (see ready)", None
    try:  # the worker runs in our directory, but a check answer is kept by its command line alone
        report, _, _ = catalog.answer(row["id"], ["check", "--model", os.path.abspath(model)], environ)
    except WorkerFailed as e:
        return str(e), None
    said = report.get("model") if isinstance(report, Mapping) else None
    if not isinstance(said, Mapping):
        return f"its check said nothing of the model ({row['id']}'s worker is older than the worker contract)", None
    reads = said.get("reads")
    if reads is not True and not (isinstance(reads, str) and reads):
        return f"its check answered reads: {reads!r}", None
    facts = said.get("facts")
    return reads, dict(facts) if reads is True and isinstance(facts, Mapping) else None


def _serves(rows: Sequence[Mapping[str, Any]], verdicts: Sequence[tuple[bool | str, Any]], model: str,
            claimed: tuple[str, Mapping[str, Any]] | None) -> str | dict[str, str]:
    """The runtime that serves ``model`` (the one whose format claims it, as ``serve`` chooses, when it
    is ready and reads it), or ``{"none": why}``."""
    if claimed is None:
        known = formats.describe({r["id"]: r.get("formats") or [] for r in rows})
        return {"none": f"no runtime here reads {model}: {known}"}
    at = next(i for i, r in enumerate(rows) if r["id"] == claimed[0])
    row, (reads, _) = rows[at], verdicts[at]
    if row.get("ready") is not True:
        return {"none": f"{row['id']} reads its format, and is not ready: {row.get('ready')}"}
    if reads is not True:
        return {"none": f"{row['id']} reads its format, and not this model: {reads}"}
    return str(row["id"])


def _capability_lines(row: Mapping[str, Any]) -> str:
    record = row.get("capabilities")
    if not isinstance(record, Mapping) or not record:
        return f"  capabilities  the {row['id']} runtime describes a model once it is loaded\n"
    lines = []
    for what, section, key in CAPABILITY_LINES:
        part = record.get(section)
        value = part.get(key) if isinstance(part, Mapping) else None
        said = "yes" if value is True else f"no: {value}" if isinstance(value, str) else \
            "no" if value is False else "said once the model is loaded"
        lines.append((what, said))
    width = max(len(w) for w, _ in lines)
    return "".join(f"  {w.ljust(width)}  {s}\n" for w, s in lines)


def model_answer(model: str, rows: Sequence[Mapping[str, Any]],
                 environ: Mapping[str, str]) -> tuple[str, dict[str, Any], bool]:
    """``superfluid runtimes <model>``: the text, the JSON document and whether a runtime here serves
    the model. Each row of ``rows`` (the ``runtimes --json`` rows) gains ``reads_model`` (true, or why
    not) and, when the runtime reports them, ``model_facts``; ``serves`` is the id of the runtime
    that serves it, or ``{"none": why}``."""
    claimed = formats.claim({r["id"]: r.get("formats") or [] for r in rows}, formats.facts_of(model))
    verdicts = [verdict(r, model, environ) for r in rows]
    serves = _serves(rows, verdicts, model, claimed)
    answered = [{**public(r), "reads_model": reads, **({"model_facts": facts} if facts is not None else {})}
                for r, (reads, facts) in zip(rows, verdicts, strict=True)]
    doc = {"model": model, "format": dict(claimed[1]) if claimed else None, "runtimes": answered, "serves": serves}
    head = claimed[1].get("describe") if claimed else "no runtime here declares this format"
    text = f"{model}: {head}\n\n"
    body = [[r["id"], "yes" if reads is True else "no", device_cell(r),
             facts_line(facts or {}) if reads is True else str(reads)]
            for r, (reads, facts) in zip(rows, verdicts, strict=True)]
    text += (table(["RUNTIME", "READS IT", "DEVICE", "MODEL"], body) if rows else "no runtime is installed here\n")
    text += "\n"
    if isinstance(serves, str):
        text += (f"{serves} serves it: the runtime that reads its format (--runtime picks another that reads it)\n"
                 + _capability_lines(next(r for r in rows if r["id"] == serves)))
    else:
        text += f"no runtime here serves it: {serves['none']}\n"
    return text, doc, isinstance(serves, str)
