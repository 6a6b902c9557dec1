"""``runtime/hostfacts/overrides``: one table of the ``SUPERFLUID_HOST_*`` variables, each one's form and
parser (issue 42, design point 5): every documented value parses to its meaning, every other is a usage
error naming the variable and its form, empty is unset, and docs/cli.md gives each form."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime.hostfacts import overrides
from superfluid.runtime.hostfacts.overrides import TABLE, parse, read
from superfluid.runtime.kernel.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]

#: the nine kinds of nonsense the issue measured with (empty is unset, and is not among them here)
NONSENSE = {"nan": "nan", "minus": "-5", "huge": "1e309", "word": "abc", "10kb": "1" * 10240,
            "unicode": "\u0666.\u0661", "commas": "6.1,,,", "gfx": "gfx", "nul": "/tmp\0x"}

#: each variable's documented values and what they mean
DOCUMENTED: list[tuple[str, str, object]] = [
    ("SUPERFLUID_HOST_OS", "linux", "linux"), ("SUPERFLUID_HOST_OS", "macOS", "macos"),
    ("SUPERFLUID_HOST_ARCH", "x64", "x64"), ("SUPERFLUID_HOST_ARCH", "arm64", "arm64"),
    ("SUPERFLUID_HOST_NVIDIA_DRIVER", "580.95.05", "580.95.05"), ("SUPERFLUID_HOST_NVIDIA_DRIVER", "none", None),
    ("SUPERFLUID_HOST_CUDA_RUNTIME", "12", 12), ("SUPERFLUID_HOST_CUDA_RUNTIME", "None", None),
    ("SUPERFLUID_HOST_CUDA_RUNTIME_VERSION", "12.4", "12.4"),
    ("SUPERFLUID_HOST_CUDA_RUNTIME_REACHABLE", "yes", True), ("SUPERFLUID_HOST_CUDA_RUNTIME_REACHABLE", "no", False),
    ("SUPERFLUID_HOST_CUDA_CAPABILITY", "6.1", ("6.1",)),
    ("SUPERFLUID_HOST_CUDA_CAPABILITY", "8.6, 8.9", ("8.6", "8.9")),
    ("SUPERFLUID_HOST_CUDA_CAPABILITY", "none", ()),
    ("SUPERFLUID_HOST_ROCM", "1", True), ("SUPERFLUID_HOST_ROCM", "no", False),
    ("SUPERFLUID_HOST_ROCM_VERSION", "6.4.1", "6.4.1"),
    ("SUPERFLUID_HOST_ROCM_GFX", "gfx90a,GFX1100 gfx90a", ("gfx90a", "gfx1100")),
    ("SUPERFLUID_HOST_VULKAN", "true", True), ("SUPERFLUID_HOST_LIBC", "musl", "musl"),
    ("SUPERFLUID_HOST_LIBC", "none", None), ("SUPERFLUID_HOST_GLIBC", "2.36", "2.36"),
    ("SUPERFLUID_HOST_GLIBCXX", "3.4.30", "3.4.30"), ("SUPERFLUID_HOST_CXXABI", "none", None),
    ("SUPERFLUID_HOST_MEMORY", "68719476736", 68719476736), ("SUPERFLUID_HOST_MEMORY", "64G", 64 << 30),
    ("SUPERFLUID_HOST_MEMORY", "1.5G", 3 << 29), ("SUPERFLUID_HOST_MEMORY", "512MiB", 512 << 20),
    ("SUPERFLUID_HOST_MEMORY", "none", None),
    ("SUPERFLUID_HOST_CPU_FEATURES", "avx, avx2 fma", ("avx", "avx2", "fma")),
    ("SUPERFLUID_HOST_CPU_FEATURES", "none", ()),
    ("SUPERFLUID_HOST_LIBRARY_PATH", "/usr/lib64:/opt/lib", ("/usr/lib64", "/opt/lib")),
    ("SUPERFLUID_HOST_ROOT", "/", "/"),
]


@pytest.mark.parametrize(("name", "value", "meaning"), DOCUMENTED, ids=[f"{n[16:]}={v}" for n, v, _ in DOCUMENTED])
def test_a_documented_value_means_what_the_docs_say(name: str, value: str, meaning: object) -> None:
    assert parse(name, value) == meaning


@pytest.mark.parametrize("kind", NONSENSE)
@pytest.mark.parametrize("name", TABLE)
def test_nonsense_is_refused_naming_the_variable_and_its_form(name: str, kind: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(name, NONSENSE[kind])
    assert caught.value.message.startswith(f"{name} is ")
    assert caught.value.message.endswith(TABLE[name].form.replace("`", ""))
    assert len(caught.value.message) < 400  # a 10 KB value is not repeated whole
    assert caught.value.fixes == () and "superfluid" not in (caught.value.advice or "")


@pytest.mark.parametrize("value", ["-5", "0", "1.5", "nan", "inf", "1e3", "9" * 20, "64X", "-1G", "0G"])
def test_memory_is_a_positive_count_of_bytes(value: str) -> None:
    with pytest.raises(UsageError, match="^SUPERFLUID_HOST_MEMORY is "):
        parse("SUPERFLUID_HOST_MEMORY", value)


def test_empty_is_unset_and_an_unknown_variable_is_refused() -> None:
    assert read(dict.fromkeys(TABLE, "")) == {}
    assert read({"SUPERFLUID_HOST_FUTURE": "", "LD_LIBRARY_PATH": "x"}) == {}
    with pytest.raises(UsageError) as caught:
        read({"SUPERFLUID_HOST_GLIBC_VERSION": "2.36"})
    assert caught.value.message == "SUPERFLUID_HOST_GLIBC_VERSION is not a host fact superfluid reads"
    assert "SUPERFLUID_HOST_GLIBC," in (caught.value.advice or "")


@pytest.mark.parametrize(("given", "stack", "versioned"), [
    ({"SUPERFLUID_HOST_CUDA_RUNTIME": "12", "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION": "13.0"}, "CUDA_RUNTIME",
     "CUDA_RUNTIME_VERSION"),
    ({"SUPERFLUID_HOST_CUDA_RUNTIME": "none", "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION": "12.4"}, "CUDA_RUNTIME",
     "CUDA_RUNTIME_VERSION"),
    ({"SUPERFLUID_HOST_ROCM": "no", "SUPERFLUID_HOST_ROCM_VERSION": "6.4"}, "ROCM", "ROCM_VERSION"),
    ({"SUPERFLUID_HOST_LIBC": "musl", "SUPERFLUID_HOST_GLIBC": "2.36"}, "LIBC", "GLIBC"),
])
def test_a_version_and_its_stack_that_contradict_are_refused(given: dict[str, str], stack: str,
                                                              versioned: str) -> None:
    with pytest.raises(UsageError, match=f"^SUPERFLUID_HOST_{stack} is .* and SUPERFLUID_HOST_{versioned} "):
        read(given)
    assert read({**given, f"SUPERFLUID_HOST_{stack}": ""})  # the version alone states its stack


def test_the_docs_give_each_variable_its_form() -> None:
    """docs/cli.md's Environment table has a row for each variable of the table, with its form."""
    rows = {line.split("|")[1].strip().strip("`"): line for line in (ROOT / "docs" / "cli.md").read_text().splitlines()
            if line.startswith("| `SUPERFLUID_HOST_")}
    assert set(rows) == set(TABLE)
    for name, override in TABLE.items():
        assert override.form in rows[name], name
    assert "empty means unset" in rows["SUPERFLUID_HOST_OS"]


def test_the_cpu_features_are_those_a_build_may_need() -> None:
    assert parse("SUPERFLUID_HOST_CPU_FEATURES", ",".join(overrides.X86_FEATURES)) == overrides.X86_FEATURES
    with pytest.raises(UsageError, match="sse4_2"):
        parse("SUPERFLUID_HOST_CPU_FEATURES", "avx,sse4_2")
