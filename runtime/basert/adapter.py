"""The basert adapter: declarations from our header and the recipe, plans by the ABI rule.

See docs/runtimes.md, "basert (baseRT)".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

from superfluid.runtime.adapter import Adapter, built_by_of
from superfluid.runtime.basert import header
from superfluid.runtime.basert.abi import abi_verdict, anyway, drives_of
from superfluid.runtime.contract import carried
from superfluid.runtime.kernel.layout import has_install_of
from superfluid.runtime.kernel.options import options_json
from superfluid.runtime.kernel.ordering import version_key
from superfluid.runtime.planning import Listing, Plan, Request, install_name

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host

__all__ = ["ADAPTER", "BasertAdapter", "pins_newest_first"]


def pins_newest_first(recipe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The recipe's ``pinned`` releases, newest version first."""
    return sorted(recipe["pinned"], key=lambda p: version_key(p["version"]), reverse=True)


class BasertAdapter(Adapter):
    """baseRT: a closed engine with a public C ABI, driven through our header."""

    id = "basert"
    linked = True
    holds_version = True
    needs_device = False
    receipt_keys = ("config_read",)
    package = "superfluid.runtime.basert"
    recipe_schema = "basert-recipe"
    options_from = "superfluid.runtime.basert.options"
    formats_from = "superfluid.runtime.basert.check"
    #: the planner, imported when an install is planned (``plan_for``), as ``options_from`` is when
    #: the options are asked: the declarations (versions, compat) and the checks never need it
    planner_from = "superfluid.runtime.basert.planner"
    presentation_from = "superfluid.runtime.basert.presentation"
    environment = ("BASERT_LIB", "BASERT_KERNEL_LIB")

    def compat(self) -> dict[str, Any]:
        """``requires`` (from the header), the unnumbered line, the pins it installs on its own."""
        installs = []
        for pin in pins_newest_first(self.recipe):
            abi = pin.get("abi")
            if abi_verdict(pin["version"], abi).is_driven:
                platforms = sorted({a["platform"] for a in pin["assets"]})
                installs.append({"version": pin["version"], "abi": abi, "platforms": platforms})
        return {"requires": dict(header.REQUIRES), "unnumbered_line": header.UNNUMBERED_LINE,
                "installs": installs, "options": options_json(self.options()), "built_by": built_by_of(self)}

    def _where(self, host: Host) -> tuple[dict[str, Any] | None, str | None]:
        """The recipe's entry for this host's platform, or the reason baseRT has no engine here."""
        platforms = self.recipe["platforms"]
        entry = platforms.get(host.platform)
        published = " and ".join(f"{p} ({e['backend']})" for p, e in sorted(platforms.items()))
        if entry is None:
            return None, f"baseRT publishes engines for {published}; this is {host.describe()}"
        if entry.get("needs") == "nvidia_driver" and not host.nvidia_driver:
            return None, f"baseRT's {entry['backend']} engine for {host.platform} needs an NVIDIA driver, " \
                         f"and this is {host.describe()}"
        return entry, None

    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The recipe's pins, newest first, each judged for ``host`` (no network)."""
        entry, not_here = self._where(host)
        drives, line = drives_of(compat_part)
        rows = []
        for pin in pins_newest_first(self.recipe):
            version, abi = pin["version"], pin.get("abi")
            judged = abi_verdict(version, abi, drives=drives, line=line)
            asset = None
            if entry is not None:
                asset = next((a for a in pin["assets"] if a["platform"] == host.platform
                              and a["backend"] == entry["backend"]), None)
            install = install_name(version, asset["backend"]) if asset else None
            if not_here:
                installs: bool | str = not_here
            elif asset is None:
                installs = f"basert {version} has no engine for {host.platform} in this superfluid's recipe"
            elif not judged.is_driven:
                installs = judged.short
            else:
                installs = True
            row: dict[str, Any] = {"version": version, "abi": abi, "installs": installs, "install": install,
                                   "installed": has_install_of(installed, version),
                                   "tested": judged.is_driven,
                                   "platforms": sorted({a["platform"] for a in pin["assets"]})}
            if asset is not None:
                # "pinned": checked against the recipe's digest; "release": against the release's
                # own <name>.sha256 and the listing's digest, which must agree (SPEC §8.2)
                row["digest"] = "pinned" if "sha256" in asset else "release"
            if not judged.is_driven:
                row["verdict"] = judged.short
                if installs == judged.short:  # it would install untested: the command that does
                    row["fixes"] = carried([anyway(version)])
            rows.append(row)
        return rows

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        """The plans by the ABI rule for the ABI ``compat_part`` requires, and its unnumbered line
        (``planner.plan``)."""
        drives, line = drives_of(compat_part)
        planner = import_module(self.planner_from)
        return list(planner.plan(request, self.recipe, host, listing, drives=drives, line=line))


ADAPTER = BasertAdapter()
