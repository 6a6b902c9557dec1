"""The worker's ``install --into DIR --plan JSON``, the part every adapter shares (SPEC §5.4, §6.5).

The installer has already downloaded, verified and extracted the plan's archives into ``DIR/lib``:
the worker never downloads. Each adapter's ``install`` reads the line and the plan here
(``parse_install``, ``check_plan``), finds its library in ``DIR/lib`` (``find_library``), judges it
with its own loader, and writes the receipt here (``write_install_receipt``). A bad line or plan is
a usage error (exit 2), refused before the library is looked at; nothing is written unless the
library is accepted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from superfluid.runtime.errors import LibraryNotFound, SuperfluidError, UsageError
from superfluid.runtime.receipt import ChosenBy

__all__ = ["LINK_W", "parse_install", "check_plan", "find_library", "write_install_receipt"]

#: the Link W protocol versions our workers speak, as receipts record them (notes §2.3)
LINK_W = (8,)
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_INSTALL = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")
_CHOSEN_BY: tuple[str, ...] = get_args(ChosenBy)
_USAGE = "install needs --into and --plan"


def parse_install(argv: Sequence[str]) -> tuple[str, str]:
    """``(DIR, plan JSON text)`` from ``--into DIR --plan JSON`` (either order, ``--flag=value`` too).

    Raises:
        UsageError: an unknown flag, a flag given twice, or ``--into``/``--plan`` missing or empty.
    """
    from superfluid.runtime.options import flag_values

    values = flag_values(argv, ("--into", "--plan"))
    if not values.get("--into") or not values.get("--plan"):
        raise UsageError(_USAGE)
    return values["--into"], values["--plan"]


def _bad(why: str) -> UsageError:
    return UsageError(f"--plan: {why}")


def _text(plan: Mapping[str, Any], key: str) -> str:
    value = plan.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{key!r} must be a non-empty string (it is {json.dumps(value)})")
    return value


def _check_assets(assets: Any) -> None:
    if not isinstance(assets, list) or not assets:
        raise _bad("'assets' must be a non-empty list (the archives the installer extracted)")
    for n, asset in enumerate(assets):
        if not isinstance(asset, dict):
            raise _bad(f"assets[{n}] is not an object")
        for key in ("name", "url"):
            if not isinstance(asset.get(key), str) or not asset[key]:
                raise _bad(f"assets[{n}] has no {key!r}")
        digest = asset.get("sha256")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise _bad(f"assets[{n}] ({asset['name']}) has no 'sha256' of 64 hexadecimal digits (it has "
                       f"{json.dumps(digest)}); the installer passes the digest it verified")


def check_plan(text: str, runtime_id: str) -> dict[str, Any]:
    """The plan JSON, checked: a plan for ``runtime_id`` with every key the receipt is made of.

    Required: ``id`` (equal to ``runtime_id``), ``version``, ``backend``, ``install`` (a name a
    directory can have) and ``assets`` (each ``name``, ``url`` and the ``sha256`` the installer
    verified). Optional: ``tested`` (true or false; absent is false), ``chosen_by`` (one of the
    receipt's). Other keys are the adapter's to check.

    Raises:
        UsageError: not JSON, not an object, a plan for another runtime, a required key missing or
            of the wrong type, an install name a directory cannot have, or an asset without its
            verified SHA-256 (the message starts ``--plan:``).
    """
    try:
        plan = json.loads(text)
    except ValueError as e:
        raise _bad(f"not valid JSON ({e})") from None
    if not isinstance(plan, dict):
        raise _bad(f"not a JSON object (it is a {type(plan).__name__})")
    if plan.get("id") != runtime_id:
        raise _bad(f"a plan for {json.dumps(plan.get('id'))} given to the {runtime_id} runtime")
    for key in ("version", "backend", "install"):
        _text(plan, key)
    if not _INSTALL.fullmatch(plan["install"]):
        raise _bad(f"'install' {plan['install']!r} is not a name an install can have (letters, digits, . _ + -)")
    _check_assets(plan.get("assets"))
    if not isinstance(plan.get("tested", False), bool):
        raise _bad("'tested' must be true or false")
    chosen = plan.get("chosen_by")
    if chosen is not None and chosen not in _CHOSEN_BY:
        raise _bad(f"'chosen_by' {json.dumps(chosen)} is not one of {', '.join(_CHOSEN_BY)}")
    return plan


def find_library(lib_dir: str, names: Sequence[str], kind: str) -> str:
    """The first of ``names`` that is a file in ``lib_dir``.

    Raises:
        LibraryNotFound: none there (``<dir> holds no A or B: the plan's archives are not <kind>
            this adapter knows``).
    """
    for name in names:
        candidate = os.path.join(lib_dir, name)
        if os.path.isfile(candidate):
            return candidate
    raise LibraryNotFound(f"{lib_dir} holds no {' or '.join(names)}: the plan's archives are not {kind} "
                          f"this adapter knows", looked=[lib_dir])


def write_install_receipt(into: str, plan: Mapping[str, Any], runtime_id: str, environ: Mapping[str, str], *,
                          abi: int | None, tested: bool, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``into/runtime.json`` for a checked ``plan`` whose library was accepted; the receipt as JSON.

    ``id``, ``install``, ``version``, ``backend``, ``sources`` (each asset's ``url`` and ``sha256``)
    and ``chosen_by`` come from the plan; ``platforms`` is the host's, ``link_w`` ours, ``worker``
    ``bin/superfluid-worker-<id>``; ``abi``, ``tested`` and ``extra`` are the adapter's verdict.

    Raises:
        BadFile: the receipt made from the plan does not validate against its schema (nothing written).
        SuperfluidError: the receipt could not be written.
    """
    from superfluid.runtime.host import detect
    from superfluid.runtime.receipt import RECEIPT, Receipt, Source, now_utc, worker_path, write_receipt

    receipt = Receipt(
        id=runtime_id,
        install=plan["install"],
        version=plan["version"],
        backend=plan["backend"],
        worker=worker_path(runtime_id),
        link_w=LINK_W,
        platforms=(detect(environ).platform,),
        sources=tuple(Source(a["url"], a["sha256"].lower()) for a in plan["assets"]),
        tested=tested,
        abi=abi,
        chosen_by=plan.get("chosen_by"),
        installed_at=now_utc(),
        extra=dict(extra or {}),
    )
    doc = receipt.to_json()
    target = os.path.join(into, RECEIPT)
    Receipt.from_json(doc, target)  # the schema's word before anything is written
    try:
        write_receipt(target, receipt)
    except OSError as e:
        raise SuperfluidError(f"cannot write {target}: {e.strerror or e}",
                              fix="the installer's staging directory must be writable") from e
    return doc
