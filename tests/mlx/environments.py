"""MLX environments for the tests: real directories whose ``bin/python`` is a script that answers the
MLX probe as a real one would (MLX itself is never imported)."""

from __future__ import annotations

import sys
from pathlib import Path

MAC = {"SUPERFLUID_HOST_OS": "macos", "SUPERFLUID_HOST_ARCH": "arm64"}
GOOD = {"python": "3.12", "mlx": "0.29.3", "mlx_lm": "0.28.2", "metal": True, "device": "Apple M3", "memory": 1 << 34}


def venv(path: Path, answer: str | None = None, *, code: int = 0, stderr: str = "") -> Path:
    """An environment at ``path`` whose ``bin/python`` prints ``answer`` (the probe's JSON line)."""
    (path / "bin").mkdir(parents=True)
    python = path / "bin" / "python"
    python.write_text(f"#!{sys.executable}\nimport sys\nprint({answer!r} if {answer!r} is not None else '')\n"
                      f"sys.stderr.write({stderr!r})\nsys.exit({code})\n")
    python.chmod(0o755)
    return path
