"""What both command lines print: plain, aligned, stable output for people, pretty JSON for machines."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from superfluid.runtime.kernel.fixes import Fix, as_json

__all__ = ["table", "print_json", "gb", "counted", "error_code", "error_doc"]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns with two-space gutters, the last column unpadded, trailing spaces trimmed."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [str(c).ljust(widths[i]) if i < len(r) - 1 else str(c) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def json_text(doc: Any) -> str:
    """``doc`` as the face prints JSON: indented, one newline after."""
    return json.dumps(doc, indent=2) + "\n"


def print_json(doc: Any) -> None:
    sys.stdout.write(json_text(doc))


def gb(n: int | None) -> str:
    """Bytes as GB with one decimal (1e9 bytes), as the daemon prints them."""
    return "-" if not n else f"{n / 1e9:.1f} GB"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 release``, ``2 releases``, ``0 keys``: a count and its noun, singular only for one."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def error_code(error: BaseException) -> str:
    """The kind of a failure as a stable short name for scripts: the error's class in kebab case,
    without ``Error`` (``UsageError`` -> ``usage``, ``AbiRefused`` -> ``abi-refused``,
    ``DownloadStalled`` -> ``download-stalled``); a private class answers as its public base."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    kept = getattr(error, "ERROR_CODE", None)  # a class renamed in the code keeps the code scripts read
    if isinstance(kept, str):
        return kept
    cls: type = type(error)
    while cls.__name__.startswith("_") and cls.__bases__:
        cls = cls.__bases__[0]
    name = cls.__name__
    if name == "SuperfluidError":
        return "failed"
    if name.endswith("Error") and len(name) > len("Error"):
        name = name[: -len("Error")]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


def error_doc(code: str, message: str, exit_code: int, *, fixes: Sequence[Fix] = (),
              advice: str | None = None) -> dict[str, Any]:
    """``{"error": {"code", "message", "exit", "fix"?, "fixes"?, "advice"?}}``: a failure in ``--json``
    mode (schema ``error``); ``fix`` is the first fix's command, ``fixes`` each as ``argv`` and ``does``."""
    error: dict[str, Any] = {"code": code, "message": message, "exit": exit_code, **as_json(fixes)}
    if advice:
        error["advice"] = advice
    return {"error": error}
