"""The basert runtime's ``check`` report and ``version`` line (schema ``basert-check``).

See docs/runtimes.md, "Devices".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime import contract
from superfluid.runtime.basert.config import facts
from superfluid.runtime.basert.header import REQUIRES, UNNUMBERED_LINE
from superfluid.runtime.basert.loader import Library, open_library
from superfluid.runtime.basert.locate import FLAG, namer
from superfluid.runtime.basert.model import Model, looks_like_model
from superfluid.runtime.basert.options import OPTIONS
from superfluid.runtime.hostfacts.system import os_name
from superfluid.runtime.kernel.errors import LibraryRefused, SuperfluidError, UsageError
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import flag_values, read_options

__all__ = ["RUNTIME_ID", "FORMATS", "TOKENIZER", "CAPABILITIES", "devices", "model_report", "check_report",
           "check_argv", "version_text", "lib_flag", "kv_bits_flag", "KV_BITS_FLAGS"]

RUNTIME_ID = "basert"
FORMATS: tuple[dict[str, Any], ...] = (
    {"id": "base", "describe": "a baseRT model file", "file": {"extensions": ["base"], "magic": "BASE"}},
)
#: libbaseRT tokenizes (``baseRT_encode``, ``baseRT_decode_token``): no tokenizer of ours
TOKENIZER = {"from": "engine"}
#: the static record (``runtime.contract``): it takes --basert-kv-bits
CAPABILITIES = contract.capabilities(kv_bits=True)


def devices(library: Library, os_name: str) -> list[dict[str, Any]]:
    """The devices the engine plans with: [] when its budget is 0, else one (see module doc)."""
    budget = library.device_memory_budget()
    if budget <= 0:
        return []
    backend = "Metal" if os_name == "macos" else "CUDA"
    return [{"backend": backend, "name": "Apple silicon GPU" if os_name == "macos" else "GPU", "memory": budget}]


def model_report(library: Library | None, path: str) -> dict[str, Any]:
    """The ``model`` object of a check: path, ``reads`` (true or why not) and the facts of ``config_of``."""
    out: dict[str, Any] = {"path": os.path.abspath(path)}
    why = looks_like_model(path)
    if why is not None:
        out["reads"] = why
        return out
    if library is None:
        out["reads"] = "not read: no usable libbaseRT here (see available)"
        return out
    try:
        with Model.load(library, path) as model:
            config = model.config()
    except SuperfluidError as e:
        out["reads"] = str(e)
        return out
    out["reads"] = True
    out["facts"] = facts(config)
    out["sizing"] = {"budget_bytes": library.device_memory_budget(), "trained_context": int(config.max_seq_len)}
    return out


def check_report(model: str | None, lib: str | None, lookup: Lookup, *,
                 executable: str | None = None, spelled: str | None = None) -> tuple[dict[str, Any], int]:
    """The check report and its exit code (0 available and the model read, else 1).

    Args:
        model: ``--model`` path, or None.
        lib: ``--basert-lib`` value, or None.
        lookup: the environment as read at the face (``BASERT_LIB``, ``SUPERFLUID_HOME``, host overrides).
        executable: the path whose directory the search starts in (default ``sys.argv[0]``).
        spelled: the flag ``lib`` was given as, when not ``--basert-lib`` (``--lib``): ``named``
            and the messages say what the user typed.
    """
    report = contract.report(RUNTIME_ID, formats=FORMATS, tokenizer=TOKENIZER, capabilities=CAPABILITIES)
    library: Library | None = None
    refused_path: str | None = None
    try:
        library = open_library(lib, lookup, executable=executable, spelled=spelled)
    except SuperfluidError as e:
        contract.refuse(report, e)
        refused_path = e.path if isinstance(e, LibraryRefused) else None
        if isinstance(e, LibraryRefused) and e.by_abi:
            # what the refused library states, so an installer can tell an ABI verdict from a fault
            report["stated"] = {"version": e.stated_version, "abi": e.stated_abi}
    if library is not None:
        report["runtime"]["version"] = f"{library.version} ({library.path})"
        report["abi"] = library.abi
    report["requires"] = dict(REQUIRES)
    report["unnumbered_line"] = UNNUMBERED_LINE
    named = namer(lib, lookup, spelled=spelled)
    if named:
        report["named"] = named
    if library is not None:
        report["library"] = library.path
        report["config_read"] = library.config_read
        report["devices"] = devices(library, os_name(lookup.host))
    elif refused_path:
        report["library"] = refused_path
    if model is not None:
        report["model"] = model_report(library, model)
    ok = library is not None and (model is None or report["model"]["reads"] is True)
    return report, 0 if ok else 1


def version_text(lib: str | None, lookup: Lookup, *,
                 executable: str | None = None) -> str:
    """``"<version> (<library path>)"`` of the library this build would drive.

    Raises:
        LibraryNotFound: as ``loader.open_library``.
        LibraryRefused: as ``loader.open_library`` (AbiRefused included).
    """
    library = open_library(lib, lookup, executable=executable)
    return f"{library.version} ({library.path})"


def lib_flag(flags: Mapping[str, str]) -> str | None:
    """The library ``--basert-lib`` names, or ``--lib`` (the face's spelling of the adapter's ``lib``).

    Raises:
        UsageError: both are given.
    """
    if FLAG in flags and "--lib" in flags:
        raise UsageError(f"{FLAG} and --lib name the same library: give one")
    return flags.get(FLAG) or flags.get("--lib")


#: ``--kv-bits`` and serve's spelling of it, which every worker takes too
KV_BITS_FLAGS = ("--kv-bits", f"--{RUNTIME_ID}-kv-bits")


def kv_bits_flag(flags: Mapping[str, str]) -> str:
    """``--kv-bits`` or ``--basert-kv-bits`` (default ``"0"``) checked against the adapter's declaration.

    Raises:
        UsageError: a value the declaration does not list, or both spellings.
    """
    given = [(flag[2:], flags[flag]) for flag in KV_BITS_FLAGS if flag in flags]
    return str(read_options(given, OPTIONS, RUNTIME_ID).get("kv-bits", "0"))


def check_argv(argv: Sequence[str], lookup: Lookup, *,
               executable: str | None = None) -> tuple[dict[str, Any], int]:
    """``check [--model PATH] [--lib PATH] [--kv-bits N]`` parsed, then ``check_report``.

    Each option is taken as ``--<option>`` or in serve's spelling (``--basert-lib``, ``--basert-kv-bits``),
    as every worker takes them; ``--kv-bits`` is checked against the adapter's declaration and does
    not change the report (a check loads no KV cache).

    Raises:
        UsageError: as ``options.flag_values``; one option in both spellings; a bad ``--kv-bits``.
    """
    flags = flag_values(argv, ("--model", FLAG, "--lib", *KV_BITS_FLAGS))
    lib = lib_flag(flags)
    kv_bits_flag(flags)
    spelled = "--lib" if "--lib" in flags else None  # ``named`` says which flag was given
    return check_report(flags.get("--model"), lib, lookup, executable=executable, spelled=spelled)
