"""``runtime/options``: an engine option's value checked against its declaration, forwarded as worker
flags, declared as JSON; and the flags of a command line read as pairs."""

from __future__ import annotations

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.options import (
    Option,
    check_options,
    check_value,
    declared_name,
    options_json,
    read_options,
    to_argv,
)

NGL = Option(name="n-gpu-layers", kind="int", description="layers on the GPU", default=-1, minimum=-1, maximum=999)
FREQ = Option(name="rope-freq-base", kind="float", description="RoPE base", minimum=0)
FLASH = Option(name="flash-attn", kind="bool", description="flash attention", default=False)
CACHE = Option(name="cache-type-k", kind="enum", description="K cache type", default="f16", values=("f16", "q8_0",
                                                                                                    "q4_0"))
SPLIT = Option(name="tensor-split", kind="list", description="split ratios", item="float")
LIB = Option(name="lib", kind="path", description="libllama to load")


@pytest.mark.parametrize(
    ("option", "raw", "value"),
    [
        pytest.param(NGL, "0", 0, id="int-zero"),
        pytest.param(NGL, "-1", -1, id="int-lower-bound"),
        pytest.param(NGL, "999", 999, id="int-upper-bound"),
        pytest.param(FREQ, "10000.5", 10000.5, id="float"),
        pytest.param(FLASH, "true", True, id="bool-true"),
        pytest.param(FLASH, "0", False, id="bool-zero"),
        pytest.param(CACHE, "q8_0", "q8_0", id="enum"),
        pytest.param(SPLIT, "3,1", [3.0, 1.0], id="list-floats"),
        pytest.param(LIB, "/opt/lib/libllama.so", "/opt/lib/libllama.so", id="path"),
    ],
)
def test_accepted_values_parse(option: Option, raw: str, value: object) -> None:
    assert check_value(option, raw) == value


@pytest.mark.parametrize(
    ("option", "raw", "fragment"),
    [
        pytest.param(NGL, "1000", "an integer from -1 to 999", id="int-above"),
        pytest.param(NGL, "-2", "an integer from -1 to 999", id="int-below"),
        pytest.param(NGL, "1.5", "an integer", id="int-fraction"),
        pytest.param(NGL, "", "an integer", id="int-empty"),
        pytest.param(FREQ, "nan", "a number of at least 0", id="float-nan"),
        pytest.param(FREQ, "-1", "a number of at least 0", id="float-negative"),
        pytest.param(FLASH, "maybe", "true or false", id="bool-word"),
        pytest.param(CACHE, "q9_9", "one of f16, q8_0, q4_0", id="enum-unknown"),
        pytest.param(SPLIT, "3,,1", "comma-separated list of floats", id="list-hole"),
        pytest.param(SPLIT, "a,b", "comma-separated list of floats", id="list-words"),
        pytest.param(LIB, "", "a path", id="path-empty"),
    ],
)
def test_wrong_values_name_flag_value_and_shape(option: Option, raw: str, fragment: str) -> None:
    with pytest.raises(UsageError) as e:
        check_value(option, raw)
    assert f"--{option.name} {raw!r}" in str(e.value)
    assert fragment in str(e.value)


def test_unknown_option_names_what_is_taken_with_serve_spelling() -> None:
    with pytest.raises(UsageError, match=r"--llamacpp-n-gpu: no such option .*n-gpu-layers"):
        check_options([NGL, FLASH], [("n-gpu", "1")], prefix="llamacpp-")


def test_checked_values_forward_as_worker_flags() -> None:
    values = check_options([NGL, FLASH, SPLIT], [("n-gpu-layers", "0"), ("flash-attn", "yes"), ("tensor-split", "1,2")])
    assert to_argv(values) == ["--n-gpu-layers", "0", "--flash-attn", "true", "--tensor-split", "1.0,2.0"]


def test_serve_spelling_forwards_with_the_runtime_prefix() -> None:
    assert to_argv({"n-gpu-layers": 0, "lib": "/x"}, prefix="llamacpp-") == ["--llamacpp-n-gpu-layers", "0",
                                                                            "--llamacpp-lib", "/x"]


@pytest.mark.parametrize(("name", "option"), [
    pytest.param("lib", "lib", id="plain"),
    pytest.param("llamacpp-lib", "lib", id="serve-spelling"),
    pytest.param("llamacpp-n-gpu-layers", "n-gpu-layers", id="serve-spelling-of-a-long-name"),
    pytest.param("basert-lib", None, id="another-runtimes-spelling"),
    pytest.param("llamacpp-", None, id="the-prefix-alone"),
    pytest.param("llamacpp-llamacpp-lib", None, id="prefixed-twice"),
    pytest.param("model", None, id="not-an-option"),
])
def test_a_worker_takes_an_option_in_either_spelling(name: str, option: str | None) -> None:
    assert declared_name(name, [NGL, LIB], "llamacpp") == option


@pytest.mark.parametrize(("pairs", "want"), [
    pytest.param([("lib", "/x"), ("n-gpu-layers", "2")], {"lib": "/x", "n-gpu-layers": 2}, id="plain"),
    pytest.param([("toy-lib", "/x"), ("toy-n-gpu-layers", "2")], {"lib": "/x", "n-gpu-layers": 2}, id="serve-spelling"),
    pytest.param([("lib", "/x"), ("lib", "/y")], {"lib": "/y"}, id="one-spelling-twice-the-last"),
    pytest.param([("lib", "/x"), ("toy-lib", "/y")], "--toy-lib and --lib name the same option: give one",
                 id="both-spellings"),
    pytest.param([("toy-n-gpu-layers", "1000")], "--toy-n-gpu-layers '1000': expected an integer from -1 to 999",
                 id="bad-value-named-as-given"),
    pytest.param([("toy-speed", "1")], r"--toy-speed: no such option \(this runtime takes: n-gpu-layers, lib\)",
                 id="unknown"),
])
def test_read_options(pairs: list[tuple[str, str]], want: dict[str, object] | str) -> None:
    if isinstance(want, dict):
        assert read_options(pairs, [NGL, LIB], "toy") == want
    else:
        with pytest.raises(UsageError, match=want):
            read_options(pairs, [NGL, LIB], "toy")


def test_json_declares_shape() -> None:
    got = {o["name"]: o for o in options_json([NGL, CACHE, SPLIT])}
    assert got["n-gpu-layers"] == {"name": "n-gpu-layers", "type": "int", "description": "layers on the GPU",
                                   "default": -1, "minimum": -1, "maximum": 999}
    assert got["cache-type-k"]["values"] == ["f16", "q8_0", "q4_0"]
    assert got["tensor-split"]["items"] == "float"


@pytest.mark.parametrize(("tokens", "takes", "want"), [
    pytest.param(["--lib", "/x", "--model=m.gguf"], ["--lib", "--model"], {"--lib": "/x", "--model": "m.gguf"},
                 id="both-spellings"),
    pytest.param([], ["--lib"], {}, id="none"),
    pytest.param(["--lib", "/x", "--lib", "/y"], ["--lib"], "--lib is given twice", id="twice"),
    pytest.param(["--lib="], ["--lib"], "--lib needs a value", id="empty-value"),
    pytest.param(["--lib"], ["--lib"], "--lib needs a value", id="no-value"),
    pytest.param(["--other", "1"], ["--lib"], "unknown flag --other", id="unknown"),
    pytest.param(["lib"], ["--lib"], "unexpected argument 'lib'", id="not-a-flag"),
    pytest.param(["--"], ["--lib"], "unexpected argument '--'", id="bare-dashes"),
])
def test_flag_values(tokens: list[str], takes: list[str], want: dict[str, str] | str) -> None:
    from superfluid.runtime.kernel.options import flag_values

    if isinstance(want, dict):
        assert flag_values(tokens, takes) == want
    else:
        with pytest.raises(UsageError, match=want):
            flag_values(tokens, takes)
