"""The basert worker's ``install``: judge the extracted libbaseRT, then write the receipt (SPEC §4.1, §5.4, §6.5).

``install --into DIR --plan JSON``. The installer has already downloaded, verified and extracted the
plan's bundle into ``DIR/lib``: the worker never downloads. Here:

1. the line and the plan are read (``runtime.install_step``, shared with every worker): a ``basert``
   plan with ``version``, ``backend``, ``install`` and ``assets`` (each with the ``sha256`` the
   installer verified), and, when given, ``abi`` as an integer or null; anything else exits 2
   before the library is looked at;
2. ``DIR/lib``'s libbaseRT is judged by the loader's verdict (SPEC §4.1: symbols, ABI number or
   unnumbered line, configuration size). A library it serves is installed, with the ABI number it
   states. A refusal *by the ABI verdict alone* (another number, or unnumbered off the line) is
   accepted only for a plan that says ``"tested": false`` (``--untested``), and recorded untested
   with the number the library states; any other refusal (a missing symbol, a configuration it
   cannot read safely, a file that does not load) is final, whatever the plan says;
3. the library must be the release the plan names: its version string equal to the plan's
   ``version`` (unless ``custom``), and its stated ABI number equal to the plan's ``abi`` when the
   plan states one;
4. ``DIR/runtime.json`` is written (``install_step.write_install_receipt``): ``abi`` from the
   library, ``tested`` and ``chosen_by`` from the plan, and ``config_read`` (``"into"`` |
   ``"by-value"``, null for a library installed untested by ABI); the same object is returned, to
   be printed compact on one line. Nothing is written on any refusal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from superfluid.runtime.errors import LibraryRefused, UsageError
from superfluid.runtime.install_step import check_plan as check_any_plan
from superfluid.runtime.install_step import find_library, write_install_receipt

__all__ = ["check_plan", "judge", "install"]

RUNTIME_ID = "basert"
_REPAIR = "`superfluid runtime repair basert` fetches it again"


def check_plan(text: str) -> dict[str, Any]:
    """The plan JSON, checked (``install_step.check_plan`` for ``basert``), and its ``abi``, when
    given, a non-negative integer or null.

    Raises:
        UsageError: as ``install_step.check_plan``; an ``abi`` of another type.
    """
    plan = check_any_plan(text, RUNTIME_ID)
    abi = plan.get("abi")
    if abi is not None and (not isinstance(abi, int) or isinstance(abi, bool) or abi < 0):
        raise UsageError(f"--plan: 'abi' must be a non-negative integer or null (it is {abi!r})")
    return plan


def _library(lib_dir: str) -> str:
    """The libbaseRT file in ``lib_dir``.

    Raises:
        LibraryNotFound: none there.
    """
    from superfluid.runtime.basert.locate import library_names

    return find_library(lib_dir, library_names(), "a baseRT bundle")


def _hold_to_plan(path: str, plan: Mapping[str, Any], version: str | None, abi: int | None) -> None:
    """The library is the release the plan names (see the module doc, step 3).

    Raises:
        LibraryRefused: its version or its stated ABI number is not the plan's.
    """
    if plan["version"] != "custom" and version != plan["version"]:
        raise LibraryRefused(path, f"libbaseRT at {path} is version {version!r}, but the plan installs baseRT "
                                   f"{plan['version']}: the bundle is not the release the plan names", fix=_REPAIR)
    want = plan.get("abi")
    if want is not None and abi != want:
        stated = f"ABI {abi}" if abi is not None else "no ABI number"
        raise LibraryRefused(path, f"libbaseRT at {path} states {stated}, but the plan's release (baseRT "
                                   f"{plan['version']}) states ABI {want}: the bundle is not the release the plan "
                                   f"names", fix=_REPAIR)


def judge(path: str, plan: Mapping[str, Any]) -> tuple[int | None, bool, dict[str, Any]]:
    """The verdict on the library at ``path`` for ``plan``: ``(abi, tested, receipt extras)``.

    Raises:
        LibraryRefused: the loader refuses it (by the ABI verdict: only for a tested plan), or it is
            not the release the plan names.
    """
    from superfluid.runtime.basert.loader import load_library

    tested = bool(plan.get("tested", False))
    try:
        library = load_library(path)
    except LibraryRefused as e:
        if not e.by_abi:
            raise
        if tested:
            raise LibraryRefused(
                e.path, f"{e.message}: the plan is tested, and a release of another ABI installs only untested "
                        f"(`superfluid runtime install basert --version {plan['version']} --untested`)",
                by_abi=True, stated_version=e.stated_version, stated_abi=e.stated_abi) from e
        _hold_to_plan(path, plan, e.stated_version, e.stated_abi)
        return e.stated_abi, False, {"config_read": None}
    _hold_to_plan(path, plan, library.version, library.abi)
    return library.abi, tested, {"config_read": library.config_read}


def install(into: str, plan: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Judge ``into/lib`` against ``plan`` and write ``into/runtime.json``; the receipt as JSON.

    Raises:
        LibraryNotFound: ``into/lib`` holds no libbaseRT.
        LibraryRefused: the library is refused (see ``judge``); nothing is written.
        BadFile: the receipt made from the plan does not validate against its schema.
        SuperfluidError: the receipt could not be written.
    """
    abi, tested, extra = judge(_library(os.path.join(into, "lib")), plan)
    return write_install_receipt(into, plan, RUNTIME_ID, environ, abi=abi, tested=tested, extra=extra)

