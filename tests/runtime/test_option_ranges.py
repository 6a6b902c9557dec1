"""Every integer option of every engine is bounded by the C field it lands in (issue 42, item 16): a
value past the field's type would wrap in the struct (``--llamacpp-n-gpu-layers 4294967295`` read as
-1), so its declared range is the field's at most, and a value past it is exit 2 naming the option."""

from __future__ import annotations

import ctypes as C
from typing import Any

import pytest

from superfluid.runtime import registry
from superfluid.runtime.llamacpp import layout
from superfluid.runtime.llamacpp.options import FIELDS
from tests import cli

#: the range of each C integer type a field can have
_RANGES: dict[Any, tuple[int, int]] = {
    C.c_int32: (-(1 << 31), (1 << 31) - 1),
    C.c_uint32: (0, (1 << 32) - 1),
}


def _field_type(struct: str, field: str) -> Any:
    """The ctypes type of ``field`` of llama.cpp's ``struct`` (``model``/``context``) in every layout
    (the two layouts agree on it)."""
    types = set()
    for lay in layout.LAYOUTS:
        fields = lay.model_fields if struct == "model" else lay.context_fields
        types |= {t for name, t, _ in fields if name == field}
    assert len(types) == 1, f"{struct}.{field}: {types}"
    return types.pop()


def _int_options() -> list[tuple[str, Any]]:
    return [(rid, o) for rid in registry.IDS for o in registry.get(rid).options() if o.kind == "int"]


@pytest.mark.parametrize(("rid", "option"), _int_options(), ids=lambda v: getattr(v, "name", v))
def test_every_integer_option_is_bounded_by_its_field(rid: str, option: Any) -> None:
    assert option.minimum is not None and option.maximum is not None, f"{rid} {option.name} has no range"
    if rid != "llamacpp":  # a Python engine's option: an int of any size, bounded all the same
        return
    struct, field, _ = FIELDS[option.name]
    lo, hi = _RANGES[_field_type(struct, field)]
    assert lo <= option.minimum and option.maximum <= hi, (option.name, field, option.minimum, option.maximum)


@pytest.mark.parametrize(("flag", "value"), [
    ("--llamacpp-n-gpu-layers", "4294967295"), ("--llamacpp-batch-size", "4294967297"),
    ("--llamacpp-main-gpu", "2147483648"), ("--llamacpp-ubatch-size", "4294967296"),
    ("--llamacpp-yarn-orig-ctx", "4294967296"),
])
def test_a_value_past_the_field_is_a_usage_error(tmp_path: Any, flag: str, value: str) -> None:
    r = cli.run("superfluid", "runtime", "check", "llamacpp", flag, value, env=cli.environment(tmp_path / "home"))
    assert r.code == 2, r.stderr
    assert f"{flag} '{value}'" in r.stderr and "to " in r.stderr


def test_the_largest_value_of_the_field_is_taken(tmp_path: Any) -> None:
    """``4294967295`` is a ``uint32_t``'s largest: the batch size is taken (the check then looks for llama.cpp)."""
    r = cli.run("superfluid", "runtime", "check", "llamacpp", "--llamacpp-batch-size", "4294967295",
                env=cli.environment(tmp_path / "home"))
    assert r.code != 2, r.stderr
