"""Plain, aligned, stable output for people, and pretty JSON for machines (SPEC §6)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["table", "print_json", "gb"]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns with two-space gutters, the last column unpadded, trailing spaces trimmed."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [str(c).ljust(widths[i]) if i < len(r) - 1 else str(c) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def gb(n: int | None) -> str:
    """Bytes as GB with one decimal (1e9 bytes), as the daemon prints them."""
    return "-" if not n else f"{n / 1e9:.1f} GB"
