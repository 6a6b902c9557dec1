"""The worker's ``install``: judge the library the installer extracted, then write the receipt (SPEC §5.4, §6.5).

``install --into DIR --plan JSON``. The installer has already downloaded, verified and extracted the
plan's archives into ``DIR/lib``: the worker never downloads (the network belongs to the installer).
Here:

1. the plan is read: a JSON object for ``llamacpp`` with ``id``, ``version``, ``backend``,
   ``install`` and ``assets`` (each ``name``, ``url`` and the ``sha256`` the installer verified);
   anything else is a usage error (exit 2), refused before the library is looked at
   (``runtime.install_step``, shared with every adapter, checks all but ``layout``);
2. ``DIR/lib``'s libllama is loaded through the loader, which proves its layout before any call
   that takes a struct. A library the loader refuses is refused here with its message (exit 1). An
   untested plan (``"tested": false``) relaxes the build rule only, never the layout: a library that
   fits no layout cannot be driven, so it is refused all the same. A plan naming its build's layout
   (the planner's ``layout``) must find that layout;
3. ``DIR/runtime.json`` is written through ``install_step.write_install_receipt`` and the same
   object is returned, to be printed compact on one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from superfluid.runtime.errors import LibraryRefused, UsageError
from superfluid.runtime.install_step import check_plan as check_any_plan
from superfluid.runtime.install_step import find_library, write_install_receipt

__all__ = ["check_plan", "install"]

RUNTIME_ID = "llamacpp"


def check_plan(text: str) -> dict[str, Any]:
    """The plan JSON, checked (``install_step.check_plan`` for ``llamacpp``), and its ``layout``, when
    given, a string.

    Raises:
        UsageError: as ``install_step.check_plan``; a ``layout`` that is not a string.
    """
    plan = check_any_plan(text, RUNTIME_ID)
    layout = plan.get("layout")
    if layout is not None and not isinstance(layout, str):
        raise UsageError("--plan: 'layout' must be a string")
    return plan


def _library(lib_dir: str) -> str:
    """The libllama file in ``lib_dir``.

    Raises:
        LibraryNotFound: none there.
    """
    from superfluid.runtime.llamacpp.locate import library_names

    return find_library(lib_dir, library_names(), "a llama.cpp build")


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
    lib = _judge(_library(os.path.join(into, "lib")), plan, environ)
    return write_install_receipt(into, plan, RUNTIME_ID, environ, abi=None, tested=bool(plan.get("tested", False)),
                                 extra={"layout": lib.layout.name})
