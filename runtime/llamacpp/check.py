"""The llama.cpp worker's ``check``: can this build run here, and what would a model cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime import contract
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.hostfacts.locate import namer
from superfluid.runtime.kernel.errors import LibraryNotFound, LibraryRefused, ModelLoadFailed
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.llamacpp import sizing
from superfluid.runtime.llamacpp.drive import devices, load_model
from superfluid.runtime.llamacpp.formats import CAPABILITIES, FORMATS, TOKENIZER
from superfluid.runtime.llamacpp.line import RUNTIME_ID, gguf_fault, library, spelled_lib
from superfluid.runtime.llamacpp.locate import LIBRARY
from superfluid.runtime.llamacpp.options import OPTIONS

__all__ = ["check_report", "check_argv", "RUNTIME_ID"]

def model_report(lib: Any, path: str, options: Mapping[str, Any], devs: list[Any],
                 host_memory: int | None) -> dict[str, Any]:
    """The ``model`` part of the report: whether it reads, its facts, sizing and state identity."""
    out: dict[str, Any] = {"path": path}
    fault = gguf_fault(path)
    if fault:
        out["reads"] = fault
        return out
    try:
        model = load_model(lib, path, options)
    except ModelLoadFailed as e:
        out["reads"] = str(e)
        return out
    with model:
        out["reads"] = True
        facts = model.facts()
        out["facts"] = facts
        budget = sizing.export_budget(sizing.resolve_device(devs, options), host_memory=host_memory)
        try:
            kv = sizing.kv_bytes_per_token(lib, sizing.layer_widths(model), options.get("cache-type-k", "f16"),
                                           options.get("cache-type-v", "f16"))
        except sizing.SizingRefused as e:
            out["sizing"] = str(e)
            if e.option is not None:  # llama.cpp makes no context with it: serving would fail (exit 3)
                out["serves"] = f"it does not serve with --{e.option} {options.get(e.option)}: {e}"
        else:
            out["sizing"] = {"weight_bytes": facts["weight_bytes"], "kv_bytes_per_token": kv,
                             "trained_context": facts["trained_context"], "budget_bytes": budget.bytes,
                             "budget_why": budget.why}
    out["state_identity"] = sizing.state_identity(sizing.weights_digest(path), options)
    return out


def check_report(model_path: str | None, options: Mapping[str, Any],
                 lookup: Lookup, *, spelled: str | None = None) -> tuple[dict[str, Any], int]:
    """The check report and its exit code: 0 when available (and the model reads), else 1.
    ``spelled`` is the library flag as given (``named`` says it; default ``--llamacpp-lib``)."""
    report = contract.report(RUNTIME_ID, formats=FORMATS, tokenizer=TOKENIZER, capabilities=CAPABILITIES)
    named = namer(LIBRARY, options.get("lib"), lookup, spelled=spelled)
    try:
        lib = library(options, lookup, spelled=spelled)
    except (LibraryNotFound, LibraryRefused) as e:
        contract.refuse(report, e)
        if isinstance(e, LibraryRefused):
            report["library"] = e.path
        if named:
            report["named"] = named
        if model_path is not None:  # what it can say without a library: the path, by its format
            report["model"] = {"path": model_path, "reads": contract.unread(FORMATS, model_path,
                                                                            "no usable llama.cpp here (see available)")}
        return report, 1
    devs = devices(lib)
    report["runtime"]["version"] = lib.version
    report["layout"] = lib.layout.name
    report["library"] = lib.path
    report["devices"] = [d.to_json() for d in devs]
    if lib.unloaded:  # a GPU module beside it that registers no device, and the loader's words of why
        report["unloaded"] = dict(lib.unloaded)
    if named:
        report["named"] = named
    if model_path is None:
        return report, 0
    report["model"] = model_report(lib, model_path, options, devs, detect(lookup.host).memory)
    ok = report["model"]["reads"] is True and report["model"].get("serves", True) is True
    return report, 0 if ok else 1


def check_argv(argv: Sequence[str], lookup: Lookup) -> tuple[dict[str, Any], int]:
    """``check <argv...>``: parse, then report.

    Raises:
        UsageError: an unknown flag or a bad option value.
    """
    model_path, options = contract.check_line(argv, OPTIONS, RUNTIME_ID)
    return check_report(model_path, options, lookup, spelled=spelled_lib(argv))
