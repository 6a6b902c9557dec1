"""The worker contract: the keys every adapter's ``check`` report carries, whatever its engine.

See docs/adapters.md, "The worker contract".
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.formats import reads
from superfluid.runtime.kernel.options import Option, declared_name, parse_flag_pairs, read_options
from superfluid.runtime.registry import aliases_of

__all__ = ["REPORT_KEYS", "RUNTIME_KEYS", "DEVICE_KEYS", "TOKENIZER_SOURCES", "DESCRIPTOR_VERSION", "report",
           "unread", "check_line", "capabilities", "refuse", "carried", "report_fixes"]

#: the keys every check report has, in the order it prints them
REPORT_KEYS = ("runtime", "available", "formats", "tokenizer", "devices", "capabilities")
#: the keys of its ``runtime``
RUNTIME_KEYS = ("id", "version", "aliases")
#: the keys of each of its ``devices``
DEVICE_KEYS = ("backend", "name", "memory")
#: where a tokenizer comes from: the engine's own, the model's Hugging Face files, a library of ours
TOKENIZER_SOURCES = ("engine", "huggingface", "library")
#: the version of the static capability record's shape
DESCRIPTOR_VERSION = 1

#: what superfluid's serving layer (``runtime/serving/``, shared by every worker) does not do, in
#: the static record's sections: text in, text out, one generation at a time
_SERVING_LAYER: dict[str, dict[str, bool | str]] = {
    "workload": {"causal_generation": True,
                 "embedding": "superfluid serves text generation only (no /v1/embeddings)",
                 "speech_to_text": "superfluid serves text prompts only"},
    "modalities": {"image_encode": "superfluid serves text prompts only",
                   "gemma_audio_encode": "superfluid serves text prompts only"},
    "sampling": {"grammar": "superfluid samples without a grammar"},
    "serving": {"multi_row_verification": "superfluid does not speculate",
                "park_lossy": "superfluid parks no session"},
}


def capabilities(*, kv_bits: bool | str) -> dict[str, Any]:
    """A runtime's static capability record: what the serving layer does (the same for every
    runtime) and whether the runtime takes ``--<id>-kv-bits`` (``load.kv_bits``: true, or why not)."""
    record: dict[str, Any] = {"descriptor_version": DESCRIPTOR_VERSION, **copy.deepcopy(_SERVING_LAYER)}
    record["load"] = {"kv_bits": kv_bits}
    return record


def report(runtime_id: str, *, formats: Sequence[Mapping[str, Any]], tokenizer: Mapping[str, Any],
           capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The keys every check report starts from (``REPORT_KEYS``), for a runtime that is available
    until its check says otherwise: no version yet, no device, its declarations copied."""
    return {"runtime": {"id": runtime_id, "version": None, "aliases": aliases_of(runtime_id)},
            "available": True, "formats": copy.deepcopy([dict(f) for f in formats]),
            "tokenizer": dict(tokenizer), "devices": [], "capabilities": copy.deepcopy(dict(capabilities))}


def refuse(report: dict[str, Any], error: SuperfluidError) -> None:
    """``report`` of a runtime not usable here, for ``error``: ``available`` its words and advice,
    ``refused`` its words alone (an installer's probe says its own next steps), and ``fixes`` its
    commands as values (``argv``, ``does`` and the ``site`` that built each), never rendered into the
    text: the face that shows the report renders them with the source flags its line gave."""
    report["available"] = error.text(fixes=())
    report["refused"] = error.message
    if error.fixes:
        report["fixes"] = carried(error.fixes)


def carried(fixes: Sequence[Fix]) -> list[dict[str, Any]]:
    """``fixes`` as a report or a row carries them to the face that renders them: each as ``argv``,
    ``does`` and the ``site`` that built it (``report_fixes`` reads them back)."""
    return [{**f.as_json(), "site": f.site} for f in fixes]


def report_fixes(report: Any) -> tuple[Fix, ...]:
    """The fixes a check ``report`` or a versions row carries (``carried``), as values with the site that built each;
    none from a report that carries none or not in that shape."""
    found = report.get("fixes") if isinstance(report, Mapping) else None
    out: list[Fix] = []
    for f in found if isinstance(found, list) else ():
        argv, does = (f.get("argv"), f.get("does")) if isinstance(f, Mapping) else (None, None)
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) and isinstance(does, str):
            site = f.get("site")
            out.append(Fix.carried(argv, does, site if isinstance(site, str) else ""))
    return tuple(out)


def unread(formats: Sequence[Mapping[str, Any]], path: str, why: str) -> str:
    """``model.reads`` of a check that has no engine to load the model with: the path refused by
    its formats alone (missing, or of another format), else ``not read: <why>``."""
    return reads(formats, path) or f"not read: {why}"


def check_line(argv: Sequence[str], options: Sequence[Option],
               runtime_id: str) -> tuple[str | None, dict[str, Any]]:
    """``check [--model PATH] [--<option> V]...``: the model path and the option values, checked
    against the runtime's declaration (``options``), each option as ``--<option>`` or in serve's
    spelling ``--<runtime_id>-<option>`` (``kernel.options.read_options``).

    Raises:
        UsageError: a flag that is neither ``--model`` nor an option (``unknown flag --x``), a flag
            without its value, a value of the wrong shape, or one option in both spellings.
    """
    model: str | None = None
    given: list[tuple[str, str]] = []
    for name, value in parse_flag_pairs(argv, lambda n: n == "model" or declared_name(n, options, runtime_id)
                                        is not None):
        if name == "model":
            model = value
        else:
            given.append((name, value))
    return model, read_options(given, options, runtime_id)
