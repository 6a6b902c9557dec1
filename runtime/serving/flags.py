"""The serve flags every serving worker shares: where to listen, the context, the queue.

See docs/host-contract.md, "1. Starting a server".
"""

from __future__ import annotations

from collections.abc import Mapping

from superfluid.runtime.kernel.errors import UsageError

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_QUEUE", "int_flag", "listen_flags", "max_context_flag",
           "queue_flag"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: requests that may wait for the engine besides the one generating (``--queue``)
DEFAULT_QUEUE = 16


def int_flag(flag: str, raw: str, lo: int, hi: int) -> int:
    """``raw`` as an integer from ``lo`` to ``hi``.

    Raises:
        UsageError: not an integer, or out of range (``--port '65536': expected an integer from 0 to 65535``).
    """
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{flag} {raw!r}: expected an integer from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise UsageError(f"{flag} {raw!r}: expected an integer from {lo} to {hi}")
    return value


def listen_flags(values: Mapping[str, str]) -> tuple[str, int]:
    """``(host, port)`` from ``{"--host": H, "--port": N}`` (either absent: the defaults).

    Raises:
        UsageError: an empty host, or a port outside 0-65535.
    """
    host = values.get("--host", DEFAULT_HOST)
    if not host:
        raise UsageError("--host needs a value")
    port = int_flag("--port", values["--port"], 0, 65535) if "--port" in values else DEFAULT_PORT
    return host, port


def max_context_flag(values: Mapping[str, str]) -> int | None:
    """``--max-context N`` from ``values`` (1 to 2**24 tokens), or None when it is absent.

    Raises:
        UsageError: not an integer in that range.
    """
    return int_flag("--max-context", values["--max-context"], 1, 1 << 24) if "--max-context" in values else None


def queue_flag(values: Mapping[str, str]) -> int:
    """``--queue N`` from ``values``: requests that may wait besides the one generating (0 to 4096;
    absent: ``DEFAULT_QUEUE``).

    Raises:
        UsageError: not an integer in that range.
    """
    return int_flag("--queue", values["--queue"], 0, 4096) if "--queue" in values else DEFAULT_QUEUE
