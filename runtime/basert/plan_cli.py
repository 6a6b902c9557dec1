"""The basert worker's ``plan``: which pinned baseRT bundles would install here (SPEC §4.1, §6.5).

``plan [--version V] [--backend B] [--from URL|PATH] [--sha256 H] [--untested]`` answers one line of
JSON, ``{"host", "describe", "plans"}`` (``runtime.plan_request``), from the recipe's pins and the
detected host (``SUPERFLUID_HOST_*`` overrides apply). The worker never touches the network:

- A pin this build drives (``adapter.pin_verdict``: its ``abi`` equals ours, or it states none and
  is of our unnumbered line, 0.3.x for ABI 1) is planned with its bundle for this platform: name,
  URL from the recipe's ``release`` template, and ``sha256``/``size`` when the recipe pins them
  (else ``null``: the installer then requires the release's ``<name>.sha256`` and the listing's
  digest to agree, SPEC §8.2); ``tested: true``, ``chosen_by: "pin"``. Without ``--version``, every
  driven pin with a bundle here is planned, newest first: the older ones are fallbacks.
- ``--version V`` plans that pin only; a pin this build does not drive needs ``--untested`` and is
  planned ``tested: false``, ``chosen_by: "untested"``.
- A version the recipe does not pin, or a host whose platform it pins no bundle for, is refused
  (exit 1): the installer chooses those from the release listing by ABI number
  (``superfluid runtime install basert``), which only it reads.
- ``--from URL|PATH`` plans that bundle as named (``chosen_by: "from"``); its digest is ``--sha256``,
  else the recipe's pin for that very file name, else ``null``.
- ``--sha256`` names the first plan's bundle: it never overrides a pinned digest (a conflict is
  refused), and with it only that one plan is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime.basert.bundles import default_backend, parse_bundle_name
from superfluid.runtime.errors import SuperfluidError, UsageError
from superfluid.runtime.ordering import backend_family
from superfluid.runtime.plan_request import PlanRequest, parse_plan_request, plans_json

__all__ = ["PlanRefused", "plan_pins", "plan_answer"]

RUNTIME_ID = "basert"
_INSTALLER = "`superfluid runtime install basert`"


class PlanRefused(SuperfluidError):
    """Nothing the request names is planned here from the recipe; the message says why."""


def _url(recipe: Mapping[str, Any], version: str, name: str) -> str:
    return str(recipe["release"]).replace("{version}", version).replace("{name}", name)


def _digest(name: str, pinned: str | None, flag: str | None) -> str | None:
    """``--sha256`` when given (it must agree with a pin), else the pin.

    Raises:
        PlanRefused: ``--sha256`` disagrees with the recipe's pin for ``name``.
    """
    if flag and pinned and flag != pinned.lower():
        raise PlanRefused(f"--sha256 {flag} disagrees with the SHA-256 this superfluid's recipe pins for {name} "
                          f"({pinned}); a pin is never overridden")
    return flag or pinned


def _entry(recipe: Mapping[str, Any], host: Any, backend: str | None) -> dict[str, Any]:
    """The recipe's platform entry for ``host``, held to ``--backend`` (or, unnamed, to the host).

    Raises:
        PlanRefused: no bundle pinned for this platform; another backend named; the platform's
            engine needs an NVIDIA driver the host lacks (and no backend named).
    """
    platforms = recipe["platforms"]
    entry = platforms.get(host.platform)
    if entry is None:
        published = " and ".join(f"{p} ({e['backend']})" for p, e in sorted(platforms.items()))
        raise PlanRefused(
            f"this superfluid's recipe pins no baseRT bundle for {host.platform} (it pins {published}; this is "
            f"{host.describe()}): the installer chooses a release for it from the release listing by ABI number, "
            f"which this worker never reads ({_INSTALLER}, or --mirror URL|DIR for a mirror that carries one)")
    if backend is not None and backend not in (entry["backend"], backend_family(entry["backend"])):
        raise PlanRefused(f"baseRT's engine for {host.platform} is {entry['backend']}, not {backend}")
    if backend is None and entry.get("needs") == "nvidia_driver" and not host.nvidia_driver:
        raise PlanRefused(f"baseRT's {entry['backend']} engine for {host.platform} needs an NVIDIA driver, and "
                          f"this is {host.describe()} (--backend {entry['backend']} plans it anyway)")
    return dict(entry)


def _pin_plan(pin: Mapping[str, Any], asset: Mapping[str, Any], recipe: Mapping[str, Any], host: Any,
              entry: Mapping[str, Any], sha256: str | None, verdict: str, untested: bool) -> dict[str, Any]:
    version, name = str(pin["version"]), str(asset["name"])
    how = f"{verdict} (UNTESTED: planned with --untested)" if untested else verdict
    return {"id": RUNTIME_ID, "version": version, "backend": asset["backend"],
            "install": f"{version}-{asset['backend']}",
            "assets": [{"name": name, "url": _url(recipe, version, name),
                        "sha256": _digest(name, asset.get("sha256"), sha256), "size": asset.get("size")}],
            "tested": not untested, "chosen_by": "untested" if untested else "pin", "abi": pin.get("abi"),
            "why": f"{host.describe()}: {how}; pinned in this superfluid's recipe; "
                   f"{entry.get('describe') or 'the ' + asset['backend'] + ' engine'}",
            "platform": host.platform, "extra": None}


def _plan_from(want: PlanRequest, recipe: Mapping[str, Any], host: Any) -> dict[str, Any]:
    """``--from URL|PATH``: that bundle, as named.

    Raises:
        PlanRefused: a bundle for another platform, or a ``--sha256`` that disagrees with a pin.
        UsageError: ``--version`` disagrees with the version in the bundle's name.
    """
    source = str(want.from_)
    name = source.rstrip("/").rsplit("/", 1)[-1]
    bundle = parse_bundle_name(name)
    if bundle is not None and bundle.platform != host.platform:
        raise PlanRefused(f"{source} is built for {bundle.platform}; this is {host.describe()}")
    if want.version and bundle is not None and want.version != bundle.version:
        raise UsageError(f"--version {want.version} disagrees with {name}, which is version {bundle.version}")
    version = want.version or (bundle.version if bundle else "custom")
    backend = want.backend or (bundle.backend if bundle else default_backend(host.platform))
    pin = next((p for p in recipe["pinned"] if p["version"] == version), None)
    pinned = next((a for a in (pin or {}).get("assets", []) if a["name"] == name), None)
    sha = _digest(name, (pinned or {}).get("sha256"), want.sha256)
    return {"id": RUNTIME_ID, "version": version, "backend": backend, "install": f"{version}-{backend}",
            "assets": [{"name": name, "url": source, "sha256": sha, "size": (pinned or {}).get("size")}],
            "tested": not want.untested, "chosen_by": "from", "abi": (pin or {}).get("abi"),
            "why": f"{source}, as named" + ("" if sha else " (no digest given: its computed SHA-256 is recorded)"),
            "platform": host.platform, "extra": None}


def plan_pins(want: PlanRequest, recipe: Mapping[str, Any], host: Any) -> list[dict[str, Any]]:
    """The ordered plans for ``want`` on ``host`` from the recipe alone (see the module doc).

    Raises:
        PlanRefused: nothing of the request is planned here (says why, and what plans it instead).
        UsageError: as ``_plan_from``.
    """
    from superfluid.runtime.basert.adapter import pin_verdict, pins_newest_first
    from superfluid.runtime.basert.header import ABI_VERSION, UNNUMBERED_LINE

    if want.from_:
        return [_plan_from(want, recipe, host)]
    entry = _entry(recipe, host, want.backend)
    pins = pins_newest_first(recipe)
    here = [(p, a) for p in pins for a in p["assets"]
            if a["platform"] == host.platform and a["backend"] == entry["backend"]]
    if want.version:
        pin = next((p for p in pins if p["version"] == want.version), None)
        if pin is None:
            raise PlanRefused(
                f"basert {want.version} is not pinned in this superfluid's recipe (it pins "
                f"{', '.join(p['version'] for p in pins)}), so its bundles and ABI number are known only from the "
                f"release listing, which this worker never reads: `superfluid runtime install basert --version "
                f"{want.version}` resolves it (or name its bundle with --from)")
        here = [(p, a) for p, a in here if p is pin]
        if not here:
            raise PlanRefused(f"basert {want.version} has no {entry['backend']} bundle for {host.platform} in this "
                              f"superfluid's recipe")
        judged = pin_verdict(pin["version"], pin.get("abi"))
        if not judged.drives and not want.untested:
            raise PlanRefused(f"basert {want.version}: {judged.verdict}; pass --untested to install it anyway")
        return [_pin_plan(pin, here[0][1], recipe, host, entry, want.sha256, judged.verdict, not judged.drives)]
    plans = []
    for pin, asset in here:
        judged = pin_verdict(pin["version"], pin.get("abi"))
        if judged.drives:
            plans.append(_pin_plan(pin, asset, recipe, host, entry, want.sha256, judged.verdict, False))
            if want.sha256:
                break  # the digest names one bundle: the newest's
    if not plans:
        line = f" (or the unnumbered {UNNUMBERED_LINE}.x line)" if UNNUMBERED_LINE else ""
        raise PlanRefused(
            f"no release this superfluid's recipe pins for {host.platform} states ABI {ABI_VERSION}{line}, the ABI "
            f"this superfluid drives: the installer chooses one from the release listing by ABI number ({_INSTALLER})")
    return plans


def plan_answer(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """``plan <argv...>``: ``{"host", "describe", "plans"}`` for the detected host.

    Raises:
        UsageError: a bad flag (``runtime.plan_request.parse_plan_request``), or as ``plan_pins``.
        PlanRefused: as ``plan_pins``.
        BadFile: the recipe is broken.
    """
    from superfluid.runtime.basert.adapter import ADAPTER
    from superfluid.runtime.host import detect

    want = parse_plan_request(argv)
    host = detect(environ)
    return plans_json(host, plan_pins(want, ADAPTER.recipe, host))
