"""The llama.cpp worker's ``check``: can this build run here, and what would a model cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from superfluid.runtime import contract
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.hostfacts.locate import namer
from superfluid.runtime.kernel.errors import LibraryNotFound, LibraryRefused, ModelLoadFailed
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import declared_name, parse_flag_pairs, read_options
from superfluid.runtime.llamacpp import sizing
from superfluid.runtime.llamacpp.drive import devices, load_model
from superfluid.runtime.llamacpp.formats import CAPABILITIES, FORMATS, TOKENIZER
from superfluid.runtime.llamacpp.loader import echoes_log, load
from superfluid.runtime.llamacpp.locate import LIBRARY, locate
from superfluid.runtime.llamacpp.options import OPTIONS

__all__ = ["parse_flags", "is_flag", "read_pairs", "check_report", "check_argv", "version_text", "RUNTIME_ID"]

RUNTIME_ID = "llamacpp"
_LIB_FLAGS = ("--lib", "--llamacpp-lib")


def is_flag(name: str, *, model: bool = True) -> bool:
    """Whether ``--name`` is a flag of this line: ``--model`` (when ``model``) or an option, as
    ``--<option>`` or in serve's spelling ``--llamacpp-<option>`` (``--lib``/``--llamacpp-lib``)."""
    return (model and name == "model") or declared_name(name, OPTIONS, RUNTIME_ID) is not None


def read_pairs(pairs: Iterable[tuple[str, str]], *, model: bool = True) -> tuple[str | None, dict[str, Any]]:
    """``(--model path, {option: checked value})`` from ``(name, value)`` pairs that ``is_flag`` knows.

    ``--lib`` (or ``--llamacpp-lib``) is the ``lib`` option; every option is read so in either spelling.

    Raises:
        UsageError: a value of the wrong shape, or one option in both spellings.
    """
    model_path: str | None = None
    given: list[tuple[str, str]] = []
    for name, value in pairs:
        if model and name == "model":
            model_path = value
        else:
            given.append((name, value))
    return model_path, read_options(given, OPTIONS, RUNTIME_ID)


def parse_flags(argv: Sequence[str], *, model: bool = True) -> tuple[str | None, dict[str, Any]]:
    """``(--model path, {option: checked value})`` from a worker command line (see ``read_pairs``).

    Raises:
        UsageError: an unknown flag, a flag without its value, or a value of the wrong shape.
    """
    return read_pairs(parse_flag_pairs(argv, lambda name: is_flag(name, model=model)), model=model)


def _load(options: Mapping[str, Any], lookup: Lookup, *, spelled: str | None = None) -> Any:
    found = locate(options.get("lib"), lookup, spelled=spelled)
    return load(found.path, echo_log=echoes_log(lookup))


def _spelled(argv: Sequence[str]) -> str | None:
    """The library flag as the command line gives it (``--lib`` or ``--llamacpp-lib``), if given."""
    for token in argv:
        flag = token.partition("=")[0]
        if flag in _LIB_FLAGS:
            return flag
    return None


def version_text(options: Mapping[str, Any], lookup: Lookup) -> str:
    """``llama.cpp <build>`` of the library this worker would drive.

    Raises:
        LibraryNotFound: no libllama where named or searched.
        LibraryRefused: a libllama these bindings do not drive.
    """
    lib = _load(options, lookup)
    return str(lib.version)


def gguf_fault(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        return f"{path} cannot be read: {e.strerror or e}"
    if magic != b"GGUF":
        return f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')"
    return None


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
        lib = _load(options, lookup, spelled=spelled)
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
    return check_report(model_path, options, lookup, spelled=_spelled(argv))
