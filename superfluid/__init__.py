"""superfluid toolchain: install, verify and drive superfluid's inference engines."""

from __future__ import annotations

from superfluid.runtime.kernel.version import VERSION as __version__

__all__ = ["__version__"]
