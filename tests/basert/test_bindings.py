"""``runtime/basert/bindings``: the one table of baseRT functions, each in our header, bound on the
real reference engines by lookup alone (a bound by-value getter is never called), absent ones None."""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import pytest
from basert_helpers import INCLUDE, lib_path

from superfluid.runtime.basert import bindings
from superfluid.runtime.basert.bindings import BOUND, OPTIONAL, bind
from superfluid.runtime.basert.config import BaseRTModelConfig


def _cdll(engines: Path, variant: str) -> ctypes.CDLL:
    return ctypes.CDLL(str(lib_path(engines, variant)), mode=os.RTLD_NOW | os.RTLD_LOCAL)


def test_every_name_once_and_declared_in_our_header() -> None:
    names = [name for name, _, _ in BOUND + OPTIONAL]
    assert len(names) == len(set(names))
    header = (INCLUDE / "baseRT.h").read_text()
    for name in names:
        assert re.search(rf"\b{name}\s*\(", header), f"{name} is not declared in baseRT.h"


def test_the_named_constants_are_in_the_table() -> None:
    bound = {name for name, _, _ in BOUND}
    optional = {name for name, _, _ in OPTIONAL}
    assert bindings.GET_CONFIG in bound
    assert {bindings.ABI_VERSION, bindings.GET_CONFIG_INTO} == optional
    assert dict((n, r) for n, _, r in BOUND)[bindings.GET_CONFIG] is BaseRTModelConfig  # by value, our struct


@pytest.mark.parametrize(("variant", "has_abi", "has_into"), [
    pytest.param("0.3.0", False, False, id="0.3.0-neither"),
    pytest.param("0.3.1", True, False, id="0.3.1-abi"),
    pytest.param("0.4.0", True, True, id="0.4.0-both"),
    pytest.param("0.2.6", False, False, id="0.2.6-neither"),
])
def test_optional_functions_are_probed(engines: Path, variant: str, has_abi: bool, has_into: bool) -> None:
    cdll = _cdll(engines, variant)
    abi, into = (bind(cdll, b) for b in OPTIONAL)
    assert (abi is not None, into is not None) == (has_abi, has_into)


def test_a_bound_function_is_typed_from_the_table(engines: Path) -> None:
    cdll = _cdll(engines, "0.4.0")
    for name, argtypes, restype in BOUND + OPTIONAL:
        fn = bind(cdll, (name, argtypes, restype))
        assert fn is not None, name
        assert list(fn.argtypes) == list(argtypes) and fn.restype is restype


def test_the_missing_symbol_variant_lacks_exactly_one(engines: Path) -> None:
    cdll = _cdll(engines, "missing-symbol")
    absent = [name for name, a, r in BOUND if bind(cdll, (name, a, r)) is None]
    assert absent == ["baseRT_decode_step"]


def test_binding_never_calls(engines: Path) -> None:
    """The wrong-size engine's by-value getter is bound (looked up) and never called."""
    cdll = _cdll(engines, "wrong-size")
    for b in BOUND:
        bind(cdll, b)
    calls = cdll.baseRT_ref_get_config_calls
    calls.restype = ctypes.c_ulong
    assert calls() == 0
