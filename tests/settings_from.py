"""The installer's ``Settings`` a test's environment makes, as the face builds them (``superfluid/settings.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from superfluid.installer.config import FetchConfig
from superfluid.installer.settings import Settings
from superfluid.settings import settings_of

__all__ = ["settings_from"]


def settings_from(environ: Mapping[str, str], *, mirror: str | None = None, offline: bool = False,
                  config: FetchConfig | None = None, json_mode: bool = False) -> Settings:
    """``settings_of(environ, ...)``, with the limits ``config`` when one is given."""
    settings = settings_of(environ, mirror=mirror, offline=offline, json_mode=json_mode)
    return settings if config is None else replace(settings, fetch=config)
