"""Where the MLX environment is found and why MLX cannot run on a host, by file lookups alone.

See docs/adapters.md, "Worked example: MLX".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Mapping
from typing import Any

from superfluid.runtime.hostfacts.host import Host, detect
from superfluid.runtime.kernel import layout
from superfluid.runtime.kernel.lookup import Lookup

__all__ = ["not_here", "find_venv", "environment"]


def not_here(host: Host, platforms: Collection[str]) -> str | None:
    """Why MLX cannot install or run on ``host``, or None when it can."""
    if host.platform in platforms:
        return None
    return f"MLX runs on Apple silicon only ({', '.join(sorted(platforms))}); this is {host.describe()}"


def find_venv(options: Mapping[str, Any], lookup: Lookup,
              worker: str | None = None) -> tuple[str | None, list[str]]:
    """The MLX environment to use and every place looked: ``--venv``, the install's ``env`` (of the
    install ``worker`` runs from; default this process), ``SUPERFLUID_MLX_VENV``, ``VIRTUAL_ENV``."""
    install = os.path.dirname(os.path.dirname(os.path.realpath(worker or sys.argv[0] or ".")))
    # only a worker run from an install (<install>/bin/, beside its receipt) uses <install>/env
    install_env = layout.install_env(install) if os.path.isfile(layout.install_receipt(install)) else None
    candidates = [options.get("venv"), install_env, lookup.variable("SUPERFLUID_MLX_VENV"),
                  lookup.variable("VIRTUAL_ENV")]
    looked = [c for c in candidates if c]
    for c in looked:
        if os.access(os.path.join(c, "bin", "python"), os.X_OK):
            return c, looked
    return None, looked


def environment(options: Mapping[str, Any], lookup: Lookup, platforms: Collection[str],
                worker: str | None = None) -> tuple[str | None, str]:
    """The MLX environment to probe, or None and why there is none here (not one of ``platforms``,
    the recipe's, or no environment where ``find_venv`` looks); from file lookups alone, nothing is run."""
    reason = not_here(detect(lookup.host), platforms)
    if reason:
        return None, reason
    venv, looked = find_venv(options, lookup, worker)
    if venv is None:
        where = ", ".join(looked) or "no --venv, no install, no SUPERFLUID_MLX_VENV or VIRTUAL_ENV"
        return None, ("the mlx runtime is not installed: no MLX environment here (looked at: " + where
                      + "): install the mlx runtime, or name an environment with --mlx-venv")
    return venv, ""
