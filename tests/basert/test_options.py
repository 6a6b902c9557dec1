"""``runtime/basert/options``: the options baseRT takes on serve — the adapter's declaration (``options_from``),
and the one table ``--kv-bits`` is checked against by check and serve."""

from __future__ import annotations

from superfluid.runtime.basert.adapter import ADAPTER
from superfluid.runtime.basert.options import OPTIONS
from superfluid.runtime.kernel.options import find, options_json


def test_the_adapter_declares_these_options() -> None:
    assert ADAPTER.options() == list(OPTIONS)
    assert [o["name"] for o in options_json(ADAPTER.options())] == ["kv-bits", "lib"]


def test_kv_bits_and_lib() -> None:
    kv_bits, lib = find(OPTIONS, "kv-bits"), find(OPTIONS, "lib")
    assert kv_bits is not None and (kv_bits.kind, kv_bits.default, kv_bits.values) == (
        "enum", "0", ("0", "4", "8", "16", "84"))
    assert lib is not None and lib.kind == "path"
