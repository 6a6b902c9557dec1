"""The basert adapter's declarations: compat, versions and options, from our header and the recipe.

basert is *linked*: the face asks it in process (SPEC §2), so this module stays light — it reads
``include/baseRT.h`` (through ``header``) and ``recipe.json``, and imports the ``ctypes`` loader only
when ``check`` runs.

Which pins this build drives is one pure rule, ``pin_verdict`` (SPEC §4.1, install choice): a pin
stating our ABI number is driven; a pin stating none is driven only when it is of our ABI's
unnumbered line (0.3.x for ABI 1); anything else installs only with ``--untested``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from superfluid.runtime.adapter import Adapter
from superfluid.runtime.basert import header
from superfluid.runtime.options import Option
from superfluid.runtime.ordering import digits_key

if TYPE_CHECKING:
    from superfluid.runtime.host import Host

__all__ = ["ADAPTER", "BasertAdapter", "PinVerdict", "pin_verdict", "pins_newest_first", "OPTIONS"]

#: basert's serve options (SPEC §7): spelled ``--basert-<name>`` on serve, ``--<name>`` to the worker
OPTIONS: tuple[Option, ...] = (
    Option("kv-bits", "enum", "bits per KV-cache element (0: the engine's default; 84: K 8-bit, V 4-bit)",
           default="0", values=("0", "4", "8", "16", "84")),
    Option("lib", "path", "the libbaseRT file (or directory holding it) to load instead of the installed one"),
)


def pins_newest_first(recipe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The recipe's ``pinned`` releases, newest version first."""
    return sorted(recipe["pinned"], key=lambda p: digits_key(p["version"]), reverse=True)


def _line_of(version: str) -> str:
    """``major.minor`` of a version: ``0.3.1`` -> ``0.3``."""
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class PinVerdict:
    """Whether this build drives a pinned release, and the short reason when it does not."""

    drives: bool
    verdict: str  # "ABI 1", "unnumbered, of ABI 1's 0.3 line", or why not


def pin_verdict(version: str, abi: int | None, *, drives: int = header.ABI_VERSION,
                line: str | None = header.UNNUMBERED_LINE) -> PinVerdict:
    """The ABI verdict on a release from its stated number (SPEC §4.1, install choice).

    A stated number must equal ours, whatever the version says; a release stating none is driven
    only if it is of the unnumbered line of our ABI (``0.3`` for ABI 1); no other is.

    >>> pin_verdict("0.5.0", 2, drives=1, line="0.3").verdict
    'ABI 2; this superfluid drives ABI 1'
    >>> pin_verdict("0.2.6", None, drives=1, line="0.3").verdict
    'unnumbered 0.2.6, not of the 0.3 line; this superfluid drives ABI 1'
    """
    if abi is not None:
        if abi == drives:
            return PinVerdict(True, f"ABI {abi}")
        return PinVerdict(False, f"ABI {abi}; this superfluid drives ABI {drives}")
    if line is not None and _line_of(version) == line:
        return PinVerdict(True, f"unnumbered, of ABI {drives}'s {line} line")
    where = f"not of the {line} line" if line else "states no ABI number"
    return PinVerdict(False, f"unnumbered {version}, {where}; this superfluid drives ABI {drives}")


class BasertAdapter(Adapter):
    """baseRT: a closed engine with a public C ABI, driven through our header (SPEC §4.1)."""

    id = "basert"
    linked = True
    package = "superfluid.runtime.basert"
    recipe_schema = "basert-recipe"

    def compat(self) -> dict[str, Any]:
        """``requires`` (from the header), the unnumbered line, the pins it installs on its own."""
        installs = []
        for pin in pins_newest_first(self.recipe):
            abi = pin.get("abi")
            if pin_verdict(pin["version"], abi).drives:
                platforms = sorted({a["platform"] for a in pin["assets"]})
                installs.append({"version": pin["version"], "abi": abi, "platforms": platforms})
        from superfluid.runtime.options import options_json

        return {"requires": dict(header.REQUIRES), "unnumbered_line": header.UNNUMBERED_LINE,
                "installs": installs, "options": options_json(self.options())}

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

    def versions(self, host: Host, installed: Collection[str]) -> list[dict[str, Any]]:
        """The recipe's pins, newest first, each judged for ``host`` (no network)."""
        entry, not_here = self._where(host)
        rows = []
        for pin in pins_newest_first(self.recipe):
            version, abi = pin["version"], pin.get("abi")
            judged = pin_verdict(version, abi)
            asset = None
            if entry is not None:
                asset = next((a for a in pin["assets"] if a["platform"] == host.platform
                              and a["backend"] == entry["backend"]), None)
            install = f"{version}-{asset['backend']}" if asset else None
            if not_here:
                installs: bool | str = not_here
            elif asset is None:
                installs = f"basert {version} has no engine for {host.platform} in this superfluid's recipe"
            elif not judged.drives:
                installs = f"{judged.verdict} (`superfluid runtime install basert --version {version} " \
                           f"--untested` installs it anyway)"
            else:
                installs = True
            row: dict[str, Any] = {"version": version, "abi": abi, "installs": installs, "install": install,
                                   "installed": any(n.startswith(f"{version}-") for n in installed),
                                   "tested": judged.drives,
                                   "platforms": sorted({a["platform"] for a in pin["assets"]})}
            if asset is not None:
                # "pinned": checked against the recipe's digest; "release": against the release's
                # own <name>.sha256 and the listing's digest, which must agree (SPEC §8.2)
                row["digest"] = "pinned" if "sha256" in asset else "release"
            if not judged.drives:
                row["verdict"] = judged.verdict
            rows.append(row)
        return rows

    def options(self) -> list[Option]:
        return list(OPTIONS)

    def check(self, argv: list[str], environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        """The worker's ``check`` in process: the report and its exit code (SPEC §6.5).

        ``check.check_argv``, what the worker's ``check`` prints; imported here so that the
        declarations never load the ``ctypes`` bindings.

        Raises:
            UsageError: an unknown flag or a bad option value.
        """
        from superfluid.runtime.basert.check import check_argv

        return check_argv(argv, environ)


ADAPTER = BasertAdapter()
