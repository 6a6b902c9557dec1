"""The request a worker's ``plan`` reads, and the answer it prints (SPEC §6.5; notes §2.2).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` is the same line for
every adapter; what is planned from it is each adapter's own rule. The answer is one line of JSON,
``{"host", "describe", "plans"}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from superfluid.runtime.errors import UsageError

__all__ = ["PlanRequest", "parse_plan_request", "plans_json"]

_VALUED = ("--version", "--backend", "--from", "--sha256")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PlanRequest:
    """What ``plan``'s flags ask for (``--backend`` and ``--sha256`` lower-cased)."""

    version: str | None = None
    backend: str | None = None
    from_: str | None = None
    sha256: str | None = None
    untested: bool = False


def parse_plan_request(argv: Sequence[str]) -> PlanRequest:
    """The request the flags name; ``--flag=value`` is read as ``--flag value``.

    Raises:
        UsageError: an unknown flag (``unknown flag X``), a flag without its value (``X needs a
            value``), a flag given twice, a value to ``--untested``, or a ``--sha256`` that is not 64
            hexadecimal digits.
    """
    from superfluid.runtime.options import flag_values

    untested = False
    rest: list[str] = []
    for token in argv:
        if token.partition("=")[0] == "--untested":
            if "=" in token:
                raise UsageError("--untested takes no value")
            untested = True
        else:
            rest.append(token)
    values = flag_values(rest, _VALUED)
    backend = values.get("--backend")
    sha256 = values.get("--sha256")
    if sha256 is not None:
        sha256 = sha256.lower()
        if not _HEX64.fullmatch(sha256):
            raise UsageError(f"--sha256 {values['--sha256']!r}: expected 64 hexadecimal digits")
    return PlanRequest(version=values.get("--version"), backend=backend.lower() if backend else None,
                       from_=values.get("--from"), sha256=sha256, untested=untested)


def plans_json(host: Any, plans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The worker's ``plan`` answer for ``host`` (a ``runtime.host.Host``): ``{"host", "describe", "plans"}``."""
    return {"host": host.to_json(), "describe": host.describe(), "plans": [dict(p) for p in plans]}
