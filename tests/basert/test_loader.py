"""The loader's verdict (SPEC §4.1) on every reference-engine variant, loaded with real dlopen."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from basert_helpers import VARIANTS, lib_path

from superfluid.runtime.basert.config import CONFIG_SIZE, BaseRTModelConfig
from superfluid.runtime.basert.header import ABI_VERSION, UNNUMBERED_LINE
from superfluid.runtime.basert.loader import config_of, dlopen, load_library
from superfluid.runtime.basert.model import Model
from superfluid.runtime.kernel.errors import AbiRefused, LibraryRefused

EXTRA = 5 * 4  # the 0.4.0, 0.5.0 and wrong-size engines append five uint32 fields to our struct


def variant_of(path: Path) -> str:
    """The variant name the engine at ``path`` was built as (a test-only export)."""
    fn = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL).baseRT_ref_variant
    fn.restype = ctypes.c_char_p
    return fn().decode()


def get_config_calls(path: Path) -> int:
    fn = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL).baseRT_ref_get_config_calls
    fn.restype = ctypes.c_ulong
    return int(fn())


SERVES = [
    pytest.param("0.3.0", {"version": "0.3.0", "abi": None, "config_read": "by-value", "config_size": CONFIG_SIZE},
                 id="0.3.0-serves-unnumbered-by-value"),
    pytest.param("0.3.1", {"version": "0.3.1", "abi": 1, "config_read": "by-value", "config_size": CONFIG_SIZE},
                 id="0.3.1-serves-abi-1-by-value"),
    pytest.param("0.4.0", {"version": "0.4.0", "abi": 1, "config_read": "into", "config_size": CONFIG_SIZE + EXTRA},
                 id="0.4.0-serves-abi-1-into"),
]

REFUSED = [
    pytest.param("0.5.0", AbiRefused, rf"states ABI 2; this superfluid drives ABI {ABI_VERSION}$",
                 id="0.5.0-refused-by-number"),
    pytest.param("0.2.6", LibraryRefused,
                 rf"is version '0\.2\.6' and states no ABI number; .* only the unnumbered "
                 rf"{UNNUMBERED_LINE}\.x line carries ABI {ABI_VERSION}",
                 id="0.2.6-refused-naming-the-line"),
    pytest.param("missing-symbol", LibraryRefused, r"lacks baseRT_decode_step:",
                 id="missing-symbol-refused-naming-it"),
    pytest.param("wrong-size", LibraryRefused,
                 rf"\(0\.3\.0\) lays out a model's configuration in {CONFIG_SIZE + EXTRA} bytes where this "
                 rf"superfluid expects {CONFIG_SIZE}, and has no baseRT_get_config_into",
                 id="wrong-size-refused-by-size"),
]


def test_table_covers_every_variant() -> None:
    named = {p.values[0] for p in SERVES + REFUSED}
    assert named == set(VARIANTS)


@pytest.mark.parametrize(("variant", "expected"), SERVES)
def test_variant_serves(engines: Path, variant: str, expected: dict[str, Any]) -> None:
    path = lib_path(engines, variant)
    assert variant_of(path) == variant  # really the build we think
    lib = load_library(str(path))
    got = {k: getattr(lib, k) for k in expected}
    assert got == expected
    assert lib.path == str(path)
    assert lib.named is None


@pytest.mark.parametrize(("variant", "error", "message"), REFUSED)
def test_variant_refused(engines: Path, variant: str, error: type[LibraryRefused], message: str) -> None:
    path = lib_path(engines, variant)
    assert variant_of(path) == variant
    with pytest.raises(LibraryRefused) as caught:
        load_library(str(path))
    e = caught.value
    assert type(e) is error
    assert e.path == str(path)
    assert e.message.startswith(f"libbaseRT at {path} ")
    assert re.search(message, e.message), e.message
    assert "superfluid runtime install basert" in str(e) and "--basert-lib" in str(e)


def test_abi_refusal_carries_the_numbers(engines: Path) -> None:
    with pytest.raises(AbiRefused) as caught:
        load_library(str(lib_path(engines, "0.5.0")))
    assert (caught.value.stated, caught.value.drives) == (2, ABI_VERSION)


def test_wrong_size_never_calls_get_config_in_process(engines: Path) -> None:
    path = lib_path(engines, "wrong-size")
    with pytest.raises(LibraryRefused):
        load_library(str(path))
    assert get_config_calls(path) == 0


_CHILD = textwrap.dedent("""
    import ctypes, os, sys
    from superfluid.runtime.basert.loader import load_library
    from superfluid.runtime.kernel.errors import LibraryRefused
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "judge":
        try:
            load_library(path)
        except LibraryRefused as e:
            print("refused:", e.message)
    else:  # a by-value call typed with the engine's own size: safe, and it must leave the marker
        class Own(ctypes.Structure):
            _fields_ = [("raw", ctypes.c_uint8 * int(sys.argv[3]))]
        lib = ctypes.CDLL(path)
        lib.baseRT_get_config.restype = Own
        lib.baseRT_get_config.argtypes = [ctypes.c_void_p]
        lib.baseRT_get_config(None)
        print("called")
""")


def _child(path: Path, marker: Path, *args: str) -> str:
    env = {**os.environ, "BASERT_REF_GET_CONFIG_MARKER": str(marker)}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_wrong_size_never_calls_get_config_in_a_fresh_process(engines: Path, tmp_path: Path) -> None:
    path = lib_path(engines, "wrong-size")
    marker = tmp_path / "get_config.marker"
    out = _child(path, marker, "judge")
    assert out.startswith("refused:") and "1812 bytes" in out
    assert not marker.exists()
    # the marker works: a (safely typed) call to the same engine's get_config leaves it
    assert _child(path, marker, "call", str(CONFIG_SIZE + EXTRA)) == "called\n"
    assert "baseRT_get_config called in wrong-size (returns 1812 bytes)" in marker.read_text()


def test_by_value_read_is_a_real_get_config_call(engines: Path, tiny_model: Path) -> None:
    path = lib_path(engines, "0.3.0")
    lib = load_library(str(path))
    before = get_config_calls(path)
    with Model.load(lib, str(tiny_model)) as model:
        config = config_of(model.library, model.handle)
    assert get_config_calls(path) == before + 1
    assert config.vocab_size == 15


def _expected_config(tiny: Path) -> dict[str, Any]:
    return {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 4, "head_dim": 16, "q_dim": 64,
            "kv_dim": 64, "ffn_dim": 256, "vocab_size": 15, "max_seq_len": 128, "architecture": b"ref",
            "attention_bias": 1, "rope_yarn_truncate": 1, "_gptoss_pad": 0, "attention_sinks": 0}


def test_into_reads_our_fields_and_ignores_theirs(engines: Path, tiny_model: Path) -> None:
    path = lib_path(engines, "0.4.0")
    lib = load_library(str(path))
    assert lib.config_size > ctypes.sizeof(BaseRTModelConfig)
    with Model.load(lib, str(tiny_model)) as model:
        config = config_of(model.library, model.handle)
    assert get_config_calls(path) == 0  # read by size, never by value
    assert isinstance(config, BaseRTModelConfig) and ctypes.sizeof(config) == CONFIG_SIZE
    assert {k: getattr(config, k) for k in _expected_config(tiny_model)} == _expected_config(tiny_model)
    assert config.swiglu_alpha == pytest.approx(1.702)
    assert config.norm_eps == pytest.approx(1e-5)
    assert list(config.ffn_dims[:3]) == [256, 256, 0]
    # byte for byte what the 0.3.0 engine returns by value for the same model
    with Model.load(load_library(str(lib_path(engines, "0.3.0"))), str(tiny_model)) as model:
        assert bytes(config) == bytes(config_of(model.library, model.handle))


def test_get_config_into_semantics_of_the_reference_engine(engines: Path, tiny_model: Path) -> None:
    """The fixture imitates baseRT 0.4.0: prefix copy by out_size, zero tail, returns its own size."""
    lib = load_library(str(lib_path(engines, "0.4.0")))
    into = lib.fn("baseRT_get_config_into")
    own = lib.config_size
    with Model.load(lib, str(tiny_model)) as model:
        canary = (ctypes.c_uint8 * (own + 64))(*([0xAB] * (own + 64)))
        assert into(model.handle, canary, 8) == own
        assert bytes(canary[8:]) == b"\xab" * (own + 56)  # nothing written past out_size
        big = (ctypes.c_uint8 * (own + 64))(*([0xAB] * (own + 64)))
        assert into(model.handle, big, own + 64) == own
        assert bytes(big[own:]) == b"\0" * 64  # zero-filled beyond the engine's struct
        assert int.from_bytes(bytes(big[CONFIG_SIZE:CONFIG_SIZE + 4]), "little") == 0xE0E0E001
        assert into(model.handle, None, 0) == own


def test_a_file_that_is_not_a_library_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "libbaseRT.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(LibraryRefused, match=rf"could not load libbaseRT at {bogus}: "):
        dlopen(str(bogus))
