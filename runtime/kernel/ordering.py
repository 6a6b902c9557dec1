"""The order of versions and of backends: the one sort key each, for planners, stores and listings."""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion, Version

from superfluid.runtime.kernel.errors import UsageError

__all__ = ["FAMILIES", "backend_family", "backend_rank", "check_backend", "version_key", "version_line"]

#: SPEC §3: metal 0, cuda 1, rocm 2, vulkan 3, sycl 4, openvino 5, other 8, cpu 9
_BACKEND_RANK = {"metal": 0, "cuda": 1, "rocm": 2, "vulkan": 3, "sycl": 4, "openvino": 5, "cpu": 9}
_DIGITS = re.compile(r"[0-9]+")
_PLAIN = re.compile(r"[0-9]+(?:\.[0-9]+)*")
#: how every PEP 440 version begins (blanks, an optional v, a digit): a version that does not (a
#: llama.cpp build, ``b11642``) is keyed by its digits without asking ``packaging``
_PEP440_START = re.compile(r"\s*v?[0-9]", re.IGNORECASE)


#: the kinds of machine a build is for (SPEC §3), in the order they are preferred
FAMILIES = tuple(sorted(_BACKEND_RANK, key=_BACKEND_RANK.__getitem__))
_BACKEND_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9.]+)*")


def check_backend(backend: str, flag: str = "--backend") -> str:
    """``backend`` when it names a kind of machine of ``FAMILIES`` (``cuda``, or a build of it as a
    release names one: ``cuda-13.4``, ``sycl-fp16``).

    Raises:
        UsageError: another word (exit 2), naming the flag and the kinds.
    """
    if not _BACKEND_NAME.fullmatch(backend) or backend_family(backend).lower() not in _BACKEND_RANK:
        raise UsageError(f"{flag} {backend!r} is not a kind of machine ({', '.join(FAMILIES)}; or a build of "
                         "one as its release names it, e.g. cuda-13.4)")
    return backend


def backend_family(backend: str) -> str:
    """The text before the first ``-`` or ``_``: ``cuda`` of ``cuda-13.4``."""
    return re.split(r"[-_]", backend, maxsplit=1)[0]


def backend_rank(backend: str) -> int:
    """A backend's rank by family, in any case (lower is preferred): the order of bundles a
    planner tries and of installs a store serves by default."""
    return _BACKEND_RANK.get(backend_family(backend).lower(), 8)


def version_key(version: str) -> tuple[Any, ...]:
    """Order versions: PEP 440 where the string is one (``0.3.1`` < ``0.4.0``, ``0.4.0rc1`` <
    ``0.4.0`` < ``0.4.0.post1``), else by its runs of digits (``b11284`` < ``b11642``); a version without digits
    sorts first.

    Plain dotted numbers (the common case, asked on every ``superfluid runtimes``) are keyed
    without asking ``packaging``; they compare as PEP 440 would (trailing zeros aside).
    """
    if _PLAIN.fullmatch(version):
        return (1, _release(version.split(".")), (1,))
    if not _PEP440_START.match(version):
        return _by_digits(version)
    try:
        v = Version(version)
    except InvalidVersion:
        return _by_digits(version)
    release = _release([str(n) for n in v.release])
    if v.pre is None and v.dev is None and v.post is None:
        return (1, release, (1,))
    # before its release (0.4.0rc1, 0.4.0.dev1) or after it (0.4.0.post1, 0.4.0.post1.dev1), as PEP 440 orders
    return (1, release, (0, v) if v < Version(v.base_version) else (2, v))


def _by_digits(version: str) -> tuple[Any, ...]:
    """The key of a version that is not PEP 440: its runs of digits (none: first)."""
    digits = _DIGITS.findall(version)
    return (1, _release(digits), (1,)) if digits else (0, version)


def _release(parts: list[str]) -> tuple[int, ...]:
    numbers = [int(p) for p in parts]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def version_line(version: str | None) -> str | None:
    """``MAJOR.MINOR`` of a version (``0.3.1`` -> ``0.3``, ``0.03.2`` -> ``0.3``), or None when it
    has no such numeric prefix."""
    parts = (version or "").split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"
