"""The ``SUPERFLUID_HOST_*`` overrides: one table of each variable, the form docs/cli.md gives it and its parser.

See docs/cli.md, "Environment".
"""

# A value outside its form is a usage error (exit 2) naming the variable and the form: never a
# traceback, never a value taken as something else. An empty value is unset (the fact is probed, as
# ``SUPERFLUID_HOME`` empty is the default home); ``none`` says the host has none of it (a list: not
# known).

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.lookup import HOST_PREFIX

__all__ = ["TABLE", "X86_FEATURES", "ARM64_HWCAPS", "parse", "read", "stated", "set_by"]

#: the x86 CPU features a build may need (``/proc/cpuinfo``'s ``flags``)
X86_FEATURES = ("avx", "avx2", "avx512f", "f16c", "fma")
#: the arm64 HWCAPs a build may need (``/proc/cpuinfo``'s ``Features``, the kernel's names of AT_HWCAP bits)
ARM64_HWCAPS = ("fp", "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme")

_NONE = "none"
_FLAGS = {"yes": True, "true": True, "1": True, "no": False, "false": False, "0": False, _NONE: False}
# ASCII digits only (``\d`` would take any script's digits), a bounded count of them (a version's
# part is no 10 KB number), each part of a list once separated by commas or spaces, no empty part
_PART = "[0-9]{1,6}"
_VERSION = re.compile(rf"{_PART}(\.{_PART}){{0,3}}")
_MAJOR = re.compile("[1-9][0-9]{0,2}")
_CAPABILITY = re.compile("[1-9][0-9]?\\.[0-9]{1,2}")
_GFX = re.compile("gfx[0-9a-f]{3,5}")
_ITEMS = re.compile(r"\s*[,\s]\s*")
_MEMORY = re.compile(r"(?P<n>[0-9]{1,19}(\.[0-9]{1,6})?)\s*(?P<unit>[KMGT]?)(i?B)?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SHOWN = 40  # characters of a refused value a message repeats


class Override(NamedTuple):
    """A host-fact variable: its name, its form in words (as docs/cli.md gives it), its parser, which
    raises ``ValueError`` for a value outside the form, and the facts it sets (keys of
    ``Host.to_json``; a version sets its stack too, unless the stack's own variable does)."""

    name: str
    form: str
    parse: Callable[[str], Any]
    sets: tuple[str, ...] = ()


def _word(*words: str) -> Callable[[str], str | None]:
    def parse(value: str) -> str | None:
        word = value.strip().lower()
        if word not in words:
            raise ValueError(value)
        return None if word == _NONE else word
    return parse


def _flag(value: str) -> bool:
    try:
        return _FLAGS[value.strip().lower()]
    except KeyError:
        raise ValueError(value) from None


def _or_none(pattern: re.Pattern[str]) -> Callable[[str], str | None]:
    def parse(value: str) -> str | None:
        text = value.strip()
        if text.lower() == _NONE:
            return None
        if not pattern.fullmatch(text):
            raise ValueError(value)
        return text
    return parse


def _major(value: str) -> int | None:
    text = _or_none(_MAJOR)(value)
    return None if text is None else int(text)


def _items(fits: Callable[[str], object]) -> Callable[[str], tuple[str, ...]]:
    """A list of words, separated by commas or spaces, each of which ``fits``; ``none``: empty."""
    def parse(value: str) -> tuple[str, ...]:
        text = value.strip().lower()
        if text == _NONE:
            return ()
        words = _ITEMS.split(text)
        if not all(w and fits(w) for w in words):
            raise ValueError(value)
        return tuple(dict.fromkeys(words))
    return parse


def _memory(value: str) -> int | None:
    """Bytes: a whole number, or a number with a unit of 1024s (``64G``, ``1.5G``, ``512MiB``)."""
    text = value.strip()
    if text.lower() == _NONE:
        return None
    m = _MEMORY.fullmatch(text)
    if m is None:
        raise ValueError(value)
    number, unit = m.group("n"), _UNITS[m.group("unit").upper()]
    whole, _, fraction = number.partition(".")
    if fraction and unit == 1:
        raise ValueError(value)  # a fraction of a byte
    n: int = int(whole) * unit + int(fraction or "0") * unit // 10 ** len(fraction)
    if not 0 < n < 1 << 63:
        raise ValueError(value)
    return n


def _directories(value: str) -> tuple[str, ...]:
    """Absolute folders, ``:``-separated (each kept as given; one that does not exist is searched
    as the loader searches it: for nothing)."""
    parts = value.split(os.pathsep)
    if not all(p.startswith("/") and "\0" not in p for p in parts):
        raise ValueError(value)
    return tuple(parts)


def _root(value: str) -> str:
    if "\0" in value or not os.path.isdir(value):
        raise ValueError(value)
    return os.path.abspath(value)


_A_VERSION = "a version such as"

#: every ``SUPERFLUID_HOST_*`` variable a superfluid reads, its form and its parser
TABLE: dict[str, Override] = {o.name: o for o in (
    Override("SUPERFLUID_HOST_OS", "`linux` or `macos`", _word("linux", "macos"), ("os",)),
    Override("SUPERFLUID_HOST_ARCH", "`x64` or `arm64`", _word("x64", "arm64"), ("arch",)),
    Override("SUPERFLUID_HOST_NVIDIA_DRIVER", f"{_A_VERSION} `580.95.05`, or `none`", _or_none(_VERSION),
             ("nvidia_driver",)),
    Override("SUPERFLUID_HOST_CUDA_RUNTIME", "a CUDA major such as `12`, or `none`", _major, ("cuda_runtime",)),
    Override("SUPERFLUID_HOST_CUDA_RUNTIME_VERSION", f"{_A_VERSION} `12.4`, or `none`", _or_none(_VERSION),
             ("cuda_runtime_version", "cuda_runtime")),
    Override("SUPERFLUID_HOST_CUDA_RUNTIME_REACHABLE", "`yes` or `no`", _flag, ("cuda_runtime_reachable",)),
    Override("SUPERFLUID_HOST_CUDA_CAPABILITY", "one `major.minor` per GPU, comma-separated, such as `6.1` or "
             "`8.6,8.9`, or `none`", _items(_CAPABILITY.fullmatch), ("cuda_capabilities",)),
    Override("SUPERFLUID_HOST_ROCM", "`yes` or `no`", _flag, ("rocm",)),
    Override("SUPERFLUID_HOST_ROCM_VERSION", f"{_A_VERSION} `6.4.1`, or `none`", _or_none(_VERSION),
             ("rocm_version", "rocm")),
    Override("SUPERFLUID_HOST_ROCM_GFX", "gfx targets, comma-separated, such as `gfx90a,gfx1100`, or `none`",
             _items(_GFX.fullmatch), ("rocm_gfx",)),
    Override("SUPERFLUID_HOST_VULKAN", "`yes` or `no`", _flag, ("vulkan",)),
    Override("SUPERFLUID_HOST_LIBC", "`glibc`, `musl`, or `none`", _word("glibc", "musl", _NONE), ("libc",)),
    Override("SUPERFLUID_HOST_GLIBC", f"{_A_VERSION} `2.36`, or `none`", _or_none(_VERSION), ("glibc", "libc")),
    Override("SUPERFLUID_HOST_GLIBCXX", f"{_A_VERSION} `3.4.30`, or `none`", _or_none(_VERSION), ("glibcxx",)),
    Override("SUPERFLUID_HOST_CXXABI", f"{_A_VERSION} `1.3.13`, or `none`", _or_none(_VERSION), ("cxxabi",)),
    Override("SUPERFLUID_HOST_MEMORY", "bytes: a whole number such as `68719476736`, or one with `K`, `M`, "
             "`G` or `T` for 1024s such as `64G` or `1.5G`, or `none`", _memory, ("memory",)),
    Override("SUPERFLUID_HOST_CPU_FEATURES", f"CPU features, comma-separated, of "
             f"{', '.join(X86_FEATURES + ARM64_HWCAPS)}, such as `avx,avx2,fma`, or `none`",
             _items(lambda w: w in X86_FEATURES or w in ARM64_HWCAPS), ("cpu_features",)),
    Override("SUPERFLUID_HOST_LIBRARY_PATH", "absolute folders, `:`-separated, such as `/usr/lib64:/opt/lib`",
             _directories, ("library_dirs",)),
    Override("SUPERFLUID_HOST_ROOT", "a folder that exists", _root),
)}


def _shown(value: str) -> str:
    """``value`` as a message repeats it: quoted, at most ``_SHOWN`` characters of it."""
    cut = value if len(value) <= _SHOWN else value[:_SHOWN] + "…"
    return repr(cut) + (f" ({len(value)} characters)" if len(value) > _SHOWN else "")


def parse(name: str, value: str) -> Any:
    """The meaning of ``value`` given to the variable ``name`` (of ``TABLE``).

    Raises:
        UsageError: ``name`` is no variable of the table, or ``value`` is outside its form.
    """
    override = TABLE.get(name)
    if override is None:
        raise UsageError(f"{name} is not a host fact superfluid reads",
                         advice=f"unset it; the host facts are {', '.join(TABLE)} (docs/cli.md, Environment)")
    try:
        return override.parse(value)
    except ValueError:
        raise UsageError(f"{name} is {_shown(value)}, not {override.form.replace('`', '')}",
                         advice="unset it (or leave it empty) to read this machine's own") from None


def stated(overrides: Mapping[str, str], name: str) -> tuple[bool, Any]:
    """``(True, meaning)`` when ``overrides`` set ``name`` (not empty), ``(False, None)`` otherwise.

    Raises:
        UsageError: its value is outside its form.
    """
    value = overrides.get(name)
    if not value:
        return False, None
    return True, parse(name, value)


def read(overrides: Mapping[str, str]) -> dict[str, Any]:
    """The meaning of each ``SUPERFLUID_HOST_*`` variable ``overrides`` set (an empty one is unset:
    left out), checked once, in the table's order.

    Raises:
        UsageError: a variable is no host fact, or its value is outside its form.
    """
    unknown = sorted(k for k, v in overrides.items() if v and k.startswith(HOST_PREFIX) and k not in TABLE)
    if unknown:
        parse(unknown[0], overrides[unknown[0]])
    facts = {name: parse(name, value) for name in TABLE if (value := overrides.get(name))}
    _agree(facts, overrides)
    return facts


def set_by(overrides: Mapping[str, str]) -> dict[str, str]:
    """Each fact (a key of ``Host.to_json``) a variable of ``overrides`` sets (an empty one sets
    nothing), and that variable: the first in the table's order where two do (``SUPERFLUID_HOST_ROCM``
    sets ``rocm`` before ``SUPERFLUID_HOST_ROCM_VERSION``, which implies it). ``SUPERFLUID_HOST_ROOT``
    sets no fact: it says where they are read."""
    out: dict[str, str] = {}
    for name, override in TABLE.items():
        if overrides.get(name):
            for fact in override.sets:
                out.setdefault(fact, name)
    return out


def _agree(facts: Mapping[str, Any], given: Mapping[str, str]) -> None:
    """A version states its stack: an override that says otherwise contradicts it.

    Raises:
        UsageError: naming both variables.
    """
    for stack, versioned in (("SUPERFLUID_HOST_CUDA_RUNTIME", "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION"),
                             ("SUPERFLUID_HOST_ROCM", "SUPERFLUID_HOST_ROCM_VERSION"),
                             ("SUPERFLUID_HOST_LIBC", "SUPERFLUID_HOST_GLIBC")):
        if stack not in facts or facts.get(versioned) is None:
            continue
        have, version = facts[stack], str(facts[versioned])
        agrees = {"SUPERFLUID_HOST_CUDA_RUNTIME": have is not None and version.split(".")[0] == str(have),
                  "SUPERFLUID_HOST_ROCM": have is True, "SUPERFLUID_HOST_LIBC": have != "musl"}[stack]
        if not agrees:
            raise UsageError(f"{stack} is {given[stack]} and {versioned} {given[versioned]}, which contradict "
                             "each other", advice=f"unset one of them ({versioned} alone implies {stack})")
