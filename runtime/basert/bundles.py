"""baseRT's release asset names: the bundles and the ABI asset.

See docs/release.md, "baseRT engine releases".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Bundle", "default_backend", "parse_bundle_name", "parse_abi_asset_name"]

_BUNDLE = re.compile(
    r"^basert-engine-(?P<os>linux|macos)-(?P<arch>x64|arm64)(?:-(?P<backend>[a-z][a-z0-9_.]*))?"
    r"-(?P<version>[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+]*)\.tar\.gz$"
)
_ABI_ASSET = re.compile(r"^basert-engine-abi-(?P<n>0|[1-9][0-9]*)\.txt$")


@dataclass(frozen=True, slots=True)
class Bundle:
    """What a baseRT bundle's name says: ``basert-engine-<platform>[-<backend>]-<version>.tar.gz``."""

    name: str
    platform: str
    backend: str
    version: str


def default_backend(platform: str) -> str:
    """The backend of a platform's own engine, which a bundle name leaves out: ``metal`` on
    ``macos-arm64``, ``cpu`` elsewhere."""
    return "metal" if platform == "macos-arm64" else "cpu"


def parse_bundle_name(name: str) -> Bundle | None:
    """Read a bundle name; None for another name.

    The backend is absent for the platform's own engine (``default_backend``; e.g. a mirror's
    ``linux-x64``); upstream names ``cuda`` on ``linux-arm64-cuda``.

    >>> parse_bundle_name("basert-engine-linux-arm64-cuda-0.4.0.tar.gz")
    Bundle(name='basert-engine-linux-arm64-cuda-0.4.0.tar.gz', platform='linux-arm64', backend='cuda', version='0.4.0')
    """
    m = _BUNDLE.match(name)
    if not m:
        return None
    platform = f"{m['os']}-{m['arch']}"
    return Bundle(name, platform, m["backend"] or default_backend(platform), m["version"])


def parse_abi_asset_name(name: str) -> int | None:
    """``N`` of an asset named ``basert-engine-abi-<N>.txt`` (decimal, no leading zero); else None."""
    m = _ABI_ASSET.match(name)
    return int(m["n"]) if m else None
