"""The workers' ``plan`` and ``install --into DIR --plan JSON``, over the installer's own functions."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.layout import install_lib, install_receipt
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import flag_values
from superfluid.runtime.kernel.receipt import Receipt, Source, write_receipt
from superfluid.runtime.kernel.record import with_files
from superfluid.runtime.planning import CHOSEN_BY, Plan, PlanAsset, Request, parse_sha256
from superfluid.runtime.probe import receipt_for

if TYPE_CHECKING:
    from superfluid.runtime.adapter import Adapter

__all__ = ["plan_answer", "parse_install", "plan_of_json", "judge_and_record"]


def plan_answer(adapter: Adapter, argv: Sequence[str], lookup: Lookup) -> dict[str, Any]:
    """``plan <argv...>``: ``{"host", "describe", "plans"}`` for the detected host (``lookup.host``: its overrides).

    Raises:
        UsageError: a bad flag (``planning.Request.from_argv``).
        NotInstallable, DigestConflict: the adapter's rules refuse.
    """
    request = Request.from_argv(adapter.id, argv)
    host = detect(lookup.host)
    plans = adapter.plan(request, host)
    return {"host": host.to_json(), "describe": host.describe(), "plans": [p.to_json() for p in plans]}


def parse_install(argv: Sequence[str]) -> tuple[str, str]:
    """``(DIR, plan JSON text)`` from ``--into DIR --plan JSON`` (either order, ``--flag=value`` too).

    Raises:
        UsageError: an unknown flag, a flag given twice, or ``--into``/``--plan`` missing or empty.
    """
    values = flag_values(argv, ("--into", "--plan"))
    if not values.get("--into") or not values.get("--plan"):
        raise UsageError("install needs --into and --plan")
    return values["--into"], values["--plan"]


def _bad(why: str) -> UsageError:
    return UsageError(f"--plan: {why}")


def _text(plan: Mapping[str, Any], key: str) -> str:
    value = plan.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{key!r} must be a non-empty string (it is {json.dumps(value)})")
    return value


def _assets(assets: Any) -> tuple[PlanAsset, ...]:
    if not isinstance(assets, list) or not assets:
        raise _bad("'assets' must be a non-empty list (the archives the installer extracted)")
    out = []
    for n, asset in enumerate(assets):
        if not isinstance(asset, dict):
            raise _bad(f"assets[{n}] is not an object")
        for key in ("name", "url"):
            if not isinstance(asset.get(key), str) or not asset[key]:
                raise _bad(f"assets[{n}] has no {key!r}")
        digest = parse_sha256(asset.get("sha256")) if isinstance(asset.get("sha256"), str) else None
        if digest is None or asset["sha256"].lower().startswith("sha256:"):
            raise _bad(f"assets[{n}] ({asset['name']}) has no 'sha256' of 64 hexadecimal digits (it has "
                       f"{json.dumps(asset.get('sha256'))}); the installer passes the digest it verified")
        out.append(PlanAsset(name=asset["name"], url=asset["url"], sha256=digest, size=None, digest_source="verified"))
    return tuple(out)


def plan_of_json(text: str, runtime_id: str) -> Plan:
    """The ``--plan`` JSON as a plan for ``runtime_id``.

    Required: ``id`` (equal to ``runtime_id``), ``version``, ``backend``, ``install`` (equal to
    ``<version>-<backend>``) and ``assets`` (each ``name``, ``url`` and the ``sha256`` the installer
    verified). Optional: ``tested`` (absent is false), ``chosen_by`` (one of the receipt's; absent:
    ``tested`` or ``untested``), ``abi`` (an integer or null), ``platform``, ``layout`` (a string),
    ``for`` (the release a ``--for`` plan was made for).

    Raises:
        UsageError: anything else (the message starts ``--plan:``).
    """
    try:
        doc = loads(text, max_bytes=1 << 20)
    except UntrustedJson as e:
        raise _bad(f"not valid JSON ({e.detail})") from None
    if not isinstance(doc, dict):
        raise _bad(f"not a JSON object (it is a {type(doc).__name__})")
    if doc.get("id") != runtime_id:
        raise _bad(f"a plan for {json.dumps(doc.get('id'))} given to the {runtime_id} runtime")
    version, backend, install = (_text(doc, k) for k in ("version", "backend", "install"))
    tested = doc.get("tested", False)
    if not isinstance(tested, bool):
        raise _bad("'tested' must be true or false")
    chosen = doc.get("chosen_by") or ("tested" if tested else "untested")
    if chosen not in CHOSEN_BY:
        raise _bad(f"'chosen_by' {json.dumps(chosen)} is not one of {', '.join(CHOSEN_BY)}")
    abi = doc.get("abi")
    if abi is not None and (not isinstance(abi, int) or isinstance(abi, bool) or abi < 0):
        raise _bad(f"'abi' must be a non-negative integer or null (it is {abi!r})")
    layout = doc.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise _bad("'layout' must be a string")
    made_for = doc.get("for")
    if made_for is not None and not (isinstance(made_for, dict) and all(isinstance(v, str) for v in made_for.values())):
        raise _bad("'for' must be an object of strings (release, version, compat_sha256)")
    plan = Plan(id=runtime_id, version=version, backend=backend, assets=_assets(doc.get("assets")), tested=tested,
                chosen_by=chosen, abi=abi, why=str(doc.get("why") or ""), platform=str(doc.get("platform") or ""),
                facts={"layout": layout} if layout else {}, made_for=made_for)
    try:
        named = plan.install
    except UsageError:
        raise _bad(f"'install' {install!r} is not a name an install can have (letters, digits, . _ + -)") from None
    if named != install:
        raise _bad(f"'install' {install!r} is not {named!r}, the name of {version} with backend {backend}")
    return plan


def judge_and_record(adapter: Adapter, into: str, plan: Plan, lookup: Lookup) -> dict[str, Any]:
    """Check ``into/lib`` in this process, judge it against ``plan`` and write ``into/runtime.json``;
    the receipt as JSON.

    Raises:
        ProbeRefused: the library is not the one the plan names, or not one this adapter drives.
        BadFile: the receipt made from the plan does not validate against its schema.
        SuperfluidError: the receipt could not be written, or DIR holds what a receipt cannot record
            (``record.NotRecordable``).
    """
    argv = adapter.probe_argv(install_lib(into))
    report, _ = import_module(f"{adapter.package}.check").check_argv(argv[1:], lookup)
    probed = adapter.judge_probe(plan, report, untested=not plan.tested)
    sources = [Source(a.url, a.sha256 or "") for a in plan.assets]
    receipt = receipt_for(plan, sources, probed, detect(lookup.host).platform)
    receipt = with_files(receipt, into)  # every file of DIR, as the installer's publish records them
    doc = receipt.to_json()
    target = install_receipt(into)
    Receipt.from_json(doc, target)  # the schema's word before anything is written
    try:
        write_receipt(target, receipt)
    except OSError as e:
        raise SuperfluidError(f"cannot write {target}: {e.strerror or e}",
                              advice="the installer's staging directory must be writable") from e
    return doc
