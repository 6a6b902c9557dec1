"""Loading libbaseRT with ctypes: dlopen, probe, verdict, and the one function that reads a config."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any

from superfluid.runtime.basert.bindings import (
    ABI_VERSION,
    BOUND,
    GET_CONFIG,
    GET_CONFIG_INTO,
    OPTIONAL,
    bind,
)
from superfluid.runtime.basert.config import CONFIG_SIZE, BaseRTModelConfig
from superfluid.runtime.basert.locate import locate
from superfluid.runtime.basert.verdict import ADVICE, ConfigRead, Probe, fix, judge
from superfluid.runtime.kernel.errors import LibraryRefused
from superfluid.runtime.kernel.lookup import Lookup

__all__ = ["Library", "dlopen", "probe", "load_library", "open_library", "config_of"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Library:
    """A libbaseRT this build drives, and what was found about it."""

    path: str
    version: str
    abi: int | None  # the stated ABI number; None when unnumbered (a 0.3.x library)
    config_read: ConfigRead  # "into" (by size) or "by-value" (sizes checked equal)
    named: str | None  # "--basert-lib" | "BASERT_LIB" | None when found by the search
    config_size: int  # the library's own sizeof(BaseRTModelConfig)
    functions: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def fn(self, name: str) -> Any:
        """The bound function ``name`` (a key of the bindings table)."""
        return self.functions[name]

    def device_memory_budget(self) -> int:
        """``baseRT_device_memory_budget()``: bytes of device memory to plan with, 0 = no device."""
        return int(self.fn("baseRT_device_memory_budget")())


def dlopen(path: str) -> ctypes.CDLL:
    """Load the shared library at ``path`` with its symbols kept local to it.

    ``RTLD_LOCAL``: two libbaseRT files loaded in one process (tests load every variant) never
    resolve each other's symbols; distinct paths are distinct objects to the dynamic loader.

    Raises:
        LibraryRefused: the dynamic loader could not load it (names the path and its reason).
    """
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        raise LibraryRefused(path, f"could not load libbaseRT at {path}: {e}", fix=fix(), advice=ADVICE) from e


def probe(cdll: ctypes.CDLL, path: str) -> tuple[Probe, dict[str, Any]]:
    """The facts of a loaded library and its bound functions.

    Looks up every symbol; stops at the first bound one missing. Calls only the identification
    functions (version string, ABI number, config size), never one that takes a model, and never
    ``baseRT_get_config``.
    """
    functions: dict[str, Any] = {}
    for binding in BOUND:
        fn = bind(cdll, binding)
        if fn is None:
            return Probe(path=path, missing=binding[0]), functions
        functions[binding[0]] = fn
    for binding in OPTIONAL:
        fn = bind(cdll, binding)
        if fn is not None:
            functions[binding[0]] = fn
    raw = functions["baseRT_version_string"]()
    version = raw.decode("utf-8", "replace") if raw else ""
    abi = int(functions[ABI_VERSION]()) if ABI_VERSION in functions else None
    size = int(functions["baseRT_model_config_sizeof"]())
    facts = Probe(path=path, version=version, abi=abi, has_into=GET_CONFIG_INTO in functions, config_size=size)
    return facts, functions


def load_library(path: str, named: str | None = None) -> Library:
    """Load and judge the library at ``path``; the Library when it serves.

    Raises:
        LibraryRefused: it cannot be loaded, lacks a bound symbol, is unnumbered off our line, or
            lays out its config in another size without ``baseRT_get_config_into``.
        AbiRefused: it states another ABI number than ours.
    """
    path = os.path.abspath(path)
    cdll = dlopen(path)
    facts, functions = probe(cdll, path)
    verdict = judge(facts, CONFIG_SIZE)
    if verdict.refusal is not None:
        raise verdict.refusal
    assert verdict.config_read is not None and facts.version is not None and facts.config_size is not None
    return Library(path=path, version=facts.version, abi=facts.abi, config_read=verdict.config_read,
                   named=named, config_size=facts.config_size, functions=functions)


def open_library(flag: str | None, lookup: Lookup, *,
                 executable: str | None = None, spelled: str | None = None) -> Library:
    """Find (``--basert-lib`` value, ``BASERT_LIB``, the search), load and judge libbaseRT.
    ``spelled`` is the flag as given when not ``--basert-lib`` (``--lib``).

    Raises:
        LibraryNotFound: nothing where it was named or searched.
        LibraryRefused: as ``load_library``.
        AbiRefused: as ``load_library``.
    """
    found = locate(flag, lookup, executable=executable, spelled=spelled)
    return load_library(found.path, named=found.named)


def config_of(library: Library, handle: int) -> BaseRTModelConfig:
    """The configuration of the model ``handle`` that ``library`` loaded (``Model.config``): the only read of it.

    By size into a zeroed struct of our size when the library has ``baseRT_get_config_into`` (fields
    the library lacks stay zero, fields beyond ours are not copied); else by value, which the verdict
    allowed only because the library's struct is exactly our size.

    Raises:
        LibraryRefused: the library object does not allow a read (never for a judged library).
    """
    out = BaseRTModelConfig()
    if library.config_read == "into":
        library.fn(GET_CONFIG_INTO)(handle, ctypes.byref(out), ctypes.sizeof(out))
        return out
    if library.config_read == "by-value" and library.config_size == ctypes.sizeof(out):
        result: BaseRTModelConfig = library.fn(GET_CONFIG)(handle)
        return result
    raise LibraryRefused(library.path, f"libbaseRT at {library.path}: its configuration cannot be read "
                                       f"safely ({library.config_size} bytes, {library.config_read})")
