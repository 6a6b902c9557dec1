"""``superfluid runtimes [--json]``: one row per runtime, what is installed and ready."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from superfluid import answer_cache, catalog
from superfluid.output import gb, json_text, table
from superfluid.runtime import registry
from superfluid.runtime.errors import WorkerFailed
from superfluid.runtime.home import current_target, home, runtime_dir, runtimes_dir

if TYPE_CHECKING:  # asked on every run: no argparse unless the command tree is built
    import argparse

__all__ = ["run", "rows"]


def _current(runtime_id: str, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The install ``current`` names, and why the runtime's installs are broken there (None: they
    are not): ``current`` is not a good link (dangling, a loop, out of the home, a file...), or the
    receipt of the install it names does not read. Nothing is followed out of the home."""
    from superfluid.runtime.errors import BadFile
    from superfluid.runtime.home import install_receipt
    from superfluid.runtime.receipt import read_receipt
    from superfluid.runtime.upkeep import puts_back

    if _homeless(environ) is not None:  # nothing is installed in a home that is not a directory
        return None, None
    root = runtime_dir(home(environ), runtime_id)
    name, problem = current_target(root)
    if problem is not None:
        return None, f"{problem}: `superfluid runtime use {runtime_id} --auto` points it at the best install"
    if name is None:
        return None, None
    repair = puts_back(runtime_id, name)
    try:
        receipt = read_receipt(install_receipt(os.path.join(root, name)))
    except BadFile as e:
        return name, f"{name} is broken: {e.message}: {repair}"
    if receipt.id != runtime_id or receipt.install != name:
        return name, f"{name} is broken: its receipt describes {receipt.id} {receipt.install}: {repair}"
    return name, None


def _glanced(runtime_id: str, install: str, environ: Mapping[str, str]) -> str | None:
    """Why the install is broken at a glance (a file its receipt records gone or not as recorded),
    with its repair; None when it looks whole. Asked when its check failed: the reason to give."""
    from superfluid.installer.home.store import fault, list_installs
    from superfluid.runtime.upkeep import puts_back

    found = next((i for i in list_installs(runtime_dir(home(environ), runtime_id)) if i.name == install), None)
    why = fault(found) if found is not None else None
    if why is None:
        return None
    return f"{install} is broken: {why}: {puts_back(runtime_id, install)}"


def _homeless(environ: Mapping[str, str]) -> str | None:
    """Why SUPERFLUID_HOME holds nothing (a file, a dangling link, a path under a file), or None."""
    from superfluid.runtime.home import home_fault

    where = home(environ)
    return None if os.path.isdir(where) else home_fault(where)


def _made_for(runtime_id: str, install: str, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The release an install was made for (its receipt's ``for``, from ``--for``), or None."""
    from superfluid.runtime.errors import BadFile
    from superfluid.runtime.home import install_dir, install_receipt
    from superfluid.runtime.receipt import read_receipt

    try:
        made_for = read_receipt(install_receipt(install_dir(home(environ), runtime_id, install))).extra.get("for")
    except BadFile:
        return None
    return made_for if isinstance(made_for, dict) else None


def _locked_by(runtime_id: str, install: str, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The lock an install came from (its receipt's ``lock``: ``{"file", "sha256"}``, from
    ``install --locked``), or None."""
    from superfluid.runtime.errors import BadFile
    from superfluid.runtime.home import install_dir, install_receipt
    from superfluid.runtime.receipt import read_receipt

    try:
        lock = read_receipt(install_receipt(install_dir(home(environ), runtime_id, install))).extra.get("lock")
    except BadFile:
        return None
    return lock if isinstance(lock, dict) else None


def _installable(runtime_id: str, environ: Mapping[str, str]) -> tuple[str | None, list[Any]]:
    """The newest version installable here (its install name) and the options, or None/[]."""
    try:
        versions, _, _ = catalog.answer(runtime_id, ["versions", "--json"], environ, accept=(0,))
        options, _, _ = catalog.answer(runtime_id, ["options", "--json"], environ, accept=(0,))
    except WorkerFailed:
        return None, []
    if not isinstance(versions, list) or not isinstance(options, list):
        return None, []
    best = next((v for v in versions if isinstance(v, dict) and v.get("installs") is True), None)
    install = (best.get("install") or best.get("version")) if best else None
    return install if isinstance(install, str) else None, options


def _requires(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"requires": ...}`` from the runtime's compat declaration when it states one, else {}."""
    try:
        compat, _, _ = catalog.answer(runtime_id, ["compat", "--json"], environ, accept=(0,))
    except WorkerFailed:
        return {}
    return {"requires": compat["requires"]} if isinstance(compat, dict) and "requires" in compat else {}


def row(runtime_id: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The JSON row of one runtime."""
    out: dict[str, Any] = {"id": runtime_id}
    current, broken = _current(runtime_id, environ)
    ref = catalog.locate(runtime_id, environ)
    report: dict[str, Any] | None
    if broken is not None:
        out.update(state="broken", ready=broken)
        report = None
        out["worker"] = ref.to_json() if ref else {"path": "linked", "source": "linked"}
        out.update(_requires(runtime_id, environ))
    elif (nothing := catalog.nothing_to_load(runtime_id, ref, environ)) is not None:
        report = {"available": nothing}  # its check's own words, and no worker started
    else:
        try:
            report, _, ref = catalog.answer(runtime_id, ["check"], environ)
        except WorkerFailed as e:
            out.update(state="missing", ready=e.reason)
            report, ref = None, None
    made_for = _made_for(runtime_id, current, environ) if current else None
    if made_for is not None:
        out["for"] = made_for
        stated = report.get("stated") if report is not None else None
        if report is not None and isinstance(stated, dict) and "abi" in stated:
            # installed for another release (--for): judged by that release's ABI, not ours
            report = {**report, "available": True, "abi": stated.get("abi"),
                      "runtime": {"version": stated.get("version")}}
    if report is not None:
        ready = report.get("available", "the worker's check said nothing about availability")
        if ready is not True and current and (glanced := _glanced(runtime_id, current, environ)) is not None:
            ready = glanced  # not "install it": a file of the current install is gone, and repair puts it back
        out["ready"] = ready
        if ready is True:
            out["state"] = "ready"
        elif current or report.get("named") or (ref is not None and ref.source != "beside superfluid"):
            out["state"] = "broken"
        else:
            out["state"] = "not installed"
        if ready is not True and (fault := _homeless(environ)) is not None:
            out.update(state="not installed", ready=f"{fault}: nothing is installed there; point SUPERFLUID_HOME "
                                                    "at a directory (it is made when missing)")
        out["worker"] = ref.to_json() if ref else {"path": "linked", "source": "linked"}
        if ready is True:
            version = (report.get("runtime") or {}).get("version")
            out["version"] = version.split(" (")[0] if isinstance(version, str) else None
            out["devices"] = report.get("devices", [])
            if "abi" in report:
                out["abi"] = report["abi"]
        if "requires" in report:
            out["requires"] = report["requires"]
    out["state"] = out.get("state", "missing")
    if current:
        out["install"] = current
        if (lock := _locked_by(runtime_id, current, environ)) is not None:
            out["lock"] = lock
    out["installable"], out["options"] = _installable(runtime_id, environ)
    # keep the documented key order: id, state, ready first
    return {k: out[k] for k in ("id", "state", "ready", *[k for k in out if k not in ("id", "state", "ready")])}


def rows(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    return [row(runtime_id, environ) for runtime_id in registry.IDS]


def _device(r: dict[str, Any]) -> str:
    devices = r.get("devices") or []
    if not devices:
        return "-"
    d = devices[0]
    return f"{d.get('backend', '?')}: {d.get('name', '?')}, {gb(d.get('memory'))}"


def _worker(worker: dict[str, Any] | None) -> str:
    if not worker:
        return "-"
    if worker.get("source") == "linked":
        return "linked (answers in process)"
    return f"{worker['source']}: {worker['path']}"


def _broken_others(runtime_id: str, current: str | None, environ: Mapping[str, str]) -> str:
    """A line for each install of the runtime other than ``current`` that is broken, with its repair
    (the table shows the current one only; ``runtime list`` shows them all)."""
    from superfluid.installer.home.store import fault, list_installs
    from superfluid.runtime.upkeep import puts_back

    lines = ""
    for i in list_installs(runtime_dir(home(environ), runtime_id)):
        if i.name != current and (why := fault(i)) is not None:
            lines += (f"{runtime_id}: {i.name} (not the current install) is broken: {why}: "
                      f"{puts_back(runtime_id, i.name)}\n")
    return lines


def _human(found: list[dict[str, Any]], environ: Mapping[str, str]) -> str:
    header = ["RUNTIME", "STATE", "INSTALL", "VERSION", "ABI", "INSTALLABLE", "DEVICE", "WORKER"]
    body = []
    for r in found:
        abi = r.get("abi", "-") if r.get("state") == "ready" else "-"
        numbered = registry.get(r["id"]).numbered_abi  # an ABI it does not state is "unnumbered"
        worker = r.get("worker")
        body.append([r["id"], r["state"], r.get("install") or "-", r.get("version") or "-",
                     "-" if abi is None and not numbered else ("unnumbered" if abi is None else str(abi)),
                     r.get("installable") or "-", _device(r),
                     _worker(worker)])
    text = table(header, body)
    for r in found:
        if r["ready"] is not True:
            text += f"{r['id']}: {r['ready']}\n"
        text += _broken_others(r["id"], r.get("install"), environ)
    for r in found:
        said = registry.get(r["id"]).requires_text(r["requires"]) if "requires" in r else None
        text += f"{said}\n" if said else ""
    fault = _homeless(environ)
    text += f"installed runtimes: {runtimes_dir(home(environ))}\n" if fault is None else \
        f"installed runtimes: none ({fault})\n"
    return text


def run(args: argparse.Namespace) -> int:
    began = time.time()
    environ = dict(os.environ)
    found = rows(environ)
    verify = getattr(args, "verify", False)
    if verify:  # asked for: reads every file of each current install (commands/verify.py)
        from superfluid.commands.verify import verified_lines, verified_rows

        found = verified_rows(found, environ)
    text = json_text(found) if args.json else _human(found, environ) + (verified_lines(found) if verify else "")
    if all(r["state"] != "missing" for r in found) and not verify:  # no worker failed: nothing expires by itself
        answer_cache.keep(["runtimes", *(["--json"] if args.json else [])], environ, text, began=began)
    sys.stdout.write(text)
    return 0
