"""The worker's ``install``: judge the library the installer extracted, then write the receipt (SPEC §5.4, §6.5).

``install --into DIR --plan JSON``. The installer has already downloaded, verified and extracted the
plan's archives into ``DIR/lib``: the worker never downloads (the network belongs to the installer).
Here:

1. the plan is read: a JSON object for ``llamacpp`` with ``id``, ``version``, ``backend``,
   ``install`` and ``assets`` (each ``name``, ``url`` and the ``sha256`` the installer verified);
   anything else is a usage error (exit 2), refused before the library is looked at;
2. ``DIR/lib``'s libllama is loaded through the loader, which proves its layout before any call
   that takes a struct. A library the loader refuses is refused here with its message (exit 1). An
   untested plan (``"tested": false``) relaxes the build rule only, never the layout: a library that
   fits no layout cannot be driven, so it is refused all the same. A plan naming its build's layout
   (the planner's ``layout``) must find that layout;
3. ``DIR/runtime.json`` is written through ``runtime.receipt`` and the same object is returned, to
   be printed compact on one line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime.errors import LibraryNotFound, LibraryRefused, SuperfluidError, UsageError

__all__ = ["LINK_W", "parse_install", "check_plan", "install"]

RUNTIME_ID = "llamacpp"
#: the Link W protocol versions this worker speaks, as the receipt records them (notes §2.3)
LINK_W = (8,)
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_INSTALL = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")
_CHOSEN_BY = ("abi", "line", "tested", "pin", "untested", "from")
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


def check_plan(text: str) -> dict[str, Any]:
    """The plan JSON, checked: a llamacpp plan with every key the receipt is made of.

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
    if plan.get("id") != RUNTIME_ID:
        raise _bad(f"a plan for {json.dumps(plan.get('id'))} given to the {RUNTIME_ID} runtime")
    for key in ("version", "backend", "install"):
        _text(plan, key)
    if not _INSTALL.fullmatch(plan["install"]):
        raise _bad(f"'install' {plan['install']!r} is not a name an install can have (letters, digits, . _ + -)")
    assets = plan.get("assets")
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
    if not isinstance(plan.get("tested", False), bool):
        raise _bad("'tested' must be true or false")
    chosen = plan.get("chosen_by")
    if chosen is not None and chosen not in _CHOSEN_BY:
        raise _bad(f"'chosen_by' {json.dumps(chosen)} is not one of {', '.join(_CHOSEN_BY)}")
    layout = plan.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise _bad("'layout' must be a string")
    return plan


def _library(lib_dir: str) -> str:
    """The libllama file in ``lib_dir``.

    Raises:
        LibraryNotFound: none there.
    """
    from superfluid.runtime.llamacpp.locate import library_names

    for name in library_names():
        candidate = os.path.join(lib_dir, name)
        if os.path.isfile(candidate):
            return candidate
    raise LibraryNotFound(f"{lib_dir} holds no {' or '.join(library_names())}: the plan's archives are not a "
                          f"llama.cpp build this adapter knows", looked=[lib_dir])


def _judge(path: str, plan: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    """Load the library and hold it to the plan.

    Raises:
        LibraryRefused: the loader refuses it, or its layout is not the one the plan's build has.
    """
    from superfluid.runtime.llamacpp.loader import load

    tested = plan.get("tested", False)
    try:
        lib = load(path, environ=dict(environ))
    except LibraryRefused as e:
        if tested:
            raise
        raise LibraryRefused(path, f"{e.message} (--untested relaxes which build is installed, never the "
                                   f"layout: a library whose structs fit no known layout cannot be driven)",
                             fix=e.fix) from e
    want = plan.get("layout")
    if want is not None and lib.layout.name != want:
        raise LibraryRefused(path, f"{path} is laid out as {lib.layout.name}, but llama.cpp {plan['version']} "
                                   f"(the plan's build) is {want}: the archives are not the build the plan names",
                             fix="`superfluid runtime repair llamacpp` fetches them again")
    return lib


def install(into: str, plan: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Judge ``into/lib`` against ``plan`` and write ``into/runtime.json``; the receipt as JSON.

    Raises:
        LibraryNotFound: ``into/lib`` holds no libllama.
        LibraryRefused: the library is not one this adapter drives (see ``_judge``).
        BadFile: the receipt made from the plan does not validate against its schema.
        SuperfluidError: the receipt could not be written.
    """
    from superfluid.runtime.host import detect
    from superfluid.runtime.receipt import RECEIPT, Receipt, Source, now_utc, worker_path, write_receipt

    lib = _judge(_library(os.path.join(into, "lib")), plan, environ)
    receipt = Receipt(
        id=RUNTIME_ID,
        install=plan["install"],
        version=plan["version"],
        backend=plan["backend"],
        worker=worker_path(RUNTIME_ID),
        link_w=LINK_W,
        platforms=(detect(environ).platform,),
        sources=tuple(Source(a["url"], a["sha256"].lower()) for a in plan["assets"]),
        tested=bool(plan.get("tested", False)),
        abi=None,
        chosen_by=plan.get("chosen_by"),
        installed_at=now_utc(),
        extra={"layout": lib.layout.name},
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
