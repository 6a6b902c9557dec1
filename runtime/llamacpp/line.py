"""The llama.cpp worker's command line: ``--model`` and the runtime's options, read and checked as
``check``, ``version`` and ``serve`` take them, and the library and model file they name. Light on
purpose: ``serve`` starts with it, without the check's host facts and sizing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import declared_name, parse_flag_pairs, read_options
from superfluid.runtime.llamacpp.loader import Library, echoes_log, load
from superfluid.runtime.llamacpp.locate import locate
from superfluid.runtime.llamacpp.options import OPTIONS

__all__ = ["RUNTIME_ID", "is_flag", "read_pairs", "parse_flags", "library", "spelled_lib", "version_text", "gguf_fault"]

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


def library(options: Mapping[str, Any], lookup: Lookup, *, spelled: str | None = None) -> Library:
    """The libllama the options name (``lib``), else the one found as ``locate`` searches, loaded.

    Raises:
        LibraryNotFound: no libllama where named or searched.
        LibraryRefused: a libllama these bindings do not drive.
    """
    found = locate(options.get("lib"), lookup, spelled=spelled)
    return load(found.path, echo_log=echoes_log(lookup))


def spelled_lib(argv: Sequence[str]) -> str | None:
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
    lib = library(options, lookup)
    return str(lib.version)


def gguf_fault(path: str) -> str | None:
    """Why ``path`` is no GGUF file this runtime reads (it cannot be read, or lacks the magic), or None."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        return f"{path} cannot be read: {e.strerror or e}"
    if magic != b"GGUF":
        return f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')"
    return None
