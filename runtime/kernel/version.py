"""This superfluid's version: one number, for both command lines and every document they write."""

from __future__ import annotations

__all__ = ["VERSION"]

VERSION = "0.1.0"
