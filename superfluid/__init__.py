"""superfluid toolchain: install, verify and drive superfluid's inference engines."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
