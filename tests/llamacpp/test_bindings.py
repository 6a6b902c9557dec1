"""``runtime/llamacpp/bindings``: the table of llama.cpp functions on each real libllama (v1, v2),
each in a fresh process (two builds' ggml cannot share one): nothing required is missing, every
function is typed for each layout (the CONTEXT and MODEL markers resolved), optional ones may be
absent; a library that is not libllama misses them all, and binding it raises."""

from __future__ import annotations

import ctypes as C
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.llamacpp.bindings import FUNCTIONS, OPTIONAL, REQUIRED, bind, missing
from superfluid.runtime.llamacpp.layout import LAYOUTS

_CHILD = textwrap.dedent("""
    import ctypes as C, json, sys
    from superfluid.runtime.llamacpp.bindings import CONTEXT, FUNCTIONS, MODEL, bind, missing
    from superfluid.runtime.llamacpp.layout import LAYOUTS
    lib = C.CDLL(sys.argv[1] + "/libllama.so")
    out = {"missing": missing(lib), "layouts": {}}
    for layout in LAYOUTS:
        bound = bind(lib, layout)
        wrong = []
        for name, fn in bound.items():
            argtypes, restype = FUNCTIONS[name]
            want = [layout.context if a == CONTEXT else layout.model if a == MODEL else a for a in argtypes]
            want_res = layout.context if restype == CONTEXT else layout.model if restype == MODEL else restype
            if list(fn.argtypes) != want or fn.restype is not want_res:
                wrong.append(name)
        out["layouts"][layout.name] = {"bound": sorted(bound), "wrong": wrong}
    print(json.dumps(out))
""")


def _in_a_fresh_process(folder: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_required_is_the_table_without_the_optional() -> None:
    assert set(REQUIRED) | OPTIONAL == set(FUNCTIONS) and not set(REQUIRED) & OPTIONAL
    assert OPTIONAL <= set(FUNCTIONS)


def test_a_real_libllama_misses_nothing_and_binds_for_every_layout(libllama_each: Path) -> None:
    got = _in_a_fresh_process(libllama_each)
    assert got["missing"] == []
    assert set(got["layouts"]) == {layout.name for layout in LAYOUTS}
    for name, layout in got["layouts"].items():
        assert layout["wrong"] == [], name
        assert set(REQUIRED) <= set(layout["bound"]) <= set(FUNCTIONS)


def test_a_library_that_is_not_libllama_misses_every_required_function(engines: Path) -> None:
    other = C.CDLL(str(engines / "0.4.0" / "libbaseRT.so"))
    assert missing(other) == list(REQUIRED)
    with pytest.raises(AttributeError):
        bind(other, LAYOUTS[0])
