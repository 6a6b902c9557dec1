"""The rules of ``runtime update``, ``repair`` and a repeated install: what each does, and when nothing is to do."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from superfluid.installer.home.hints import install_it, remove_it
from superfluid.runtime.kernel.fixes import Fix, repair
from superfluid.runtime.kernel.ordering import backend_family, version_key
from superfluid.runtime.planning import NotInstallable, Plan, first_published, parse_install_name

if TYPE_CHECKING:
    from superfluid.installer.home.installs import Installed
    from superfluid.runtime.kernel.receipt import Receipt

__all__ = ["update_wanted", "nothing_to_update", "repair_target", "repair_wanted", "first_known", "same_archives",
           "same_install"]

_T = TypeVar("_T")


def update_wanted(old: Receipt) -> dict[str, Any]:
    """What ``runtime update`` plans for: the newest installable build of the default install's
    backend family, by the usual rules (no version, no ``--from``, no digest)."""
    return {"version": None, "backend": backend_family(old.backend), "from_": None, "sha256": None}


def nothing_to_update(runtime_id: str, current: str, old: Receipt, first: Plan,
                      installed: Collection[str]) -> tuple[str, Fix | None] | None:
    """Why ``runtime update`` installs nothing, and what installs the newest release beside the
    default install when that is a choice (None: it installs ``first``): the newest plan is
    installed already, or the default install ``current`` (receipt ``old``) is a build of the
    user's own or newer than it."""
    if first.install in installed:
        return (f"{runtime_id} {first.install} is installed; nothing newer installs here for "
                f"{backend_family(old.backend)}", None)
    if old.version == "custom" or version_key(old.version) > version_key(first.version):
        why = ("it is a build of your own, not one of a release" if old.version == "custom"
               else f"it is {old.version}, newer than {first.version}, the newest that installs here")
        beside = Fix.superfluid("runtime", "install", runtime_id, "--version", first.version,
                                does=f"installs {first.version} beside it")
        return f"{runtime_id} {current}: {why}; nothing to update", beside
    return None


def repair_target(runtime_id: str, present: Mapping[str, _T], current: str | None,
                  default: Callable[[], str | None]) -> _T:
    """What a bare ``runtime repair`` repairs among the installs ``present``: the one ``current``
    names, broken or not (never another one in its place), else the default install (``default()``,
    asked only then), else the one install there is.

    Raises:
        NotInstallable: nothing is installed, or several broken installs and no ``current`` to choose.
    """
    name = current
    if name is None or name not in present:
        name = default()
    if name is None and len(present) == 1:
        name = next(iter(present))
    if name is None:
        if present:
            raise NotInstallable(f"{runtime_id}: several installs are broken ({', '.join(present)}) and none is the "
                                 "current one", fix=[repair(runtime_id, name) for name in present])
        raise NotInstallable(f"{runtime_id} is not installed", fix=install_it(runtime_id))
    return present[name]


def repair_wanted(runtime_id: str, name: str, receipt: Receipt | None, problem: str | None) -> dict[str, Any]:
    """What ``runtime repair`` reinstalls in place of the install ``name``: what its receipt says
    (the same ``--from`` source and digest for an install from one), or, when the receipt is what
    is broken (``problem``), the version and backend its name says, as untested.

    Raises:
        NotInstallable: no receipt, and the name does not say both.
    """
    if receipt is not None:
        wanted: dict[str, Any] = {"version": receipt.version, "backend": receipt.backend,
                                  "untested": not receipt.tested, "from_": None, "sha256": None}
        if receipt.chosen_by == "from" and receipt.sources:
            wanted.update(from_=receipt.sources[0].url, sha256=receipt.sources[0].sha256 or None,
                          version=None if receipt.version == "custom" else receipt.version)
        return wanted
    parsed = parse_install_name(name)
    if parsed is None:
        raise NotInstallable(f"{runtime_id} {name}: {problem}; its name does not say what to reinstall",
                             fix=remove_it(runtime_id, name))
    return {"version": parsed[0], "backend": parsed[1], "untested": True, "from_": None, "sha256": None}


def first_known(plans: Sequence[Plan]) -> Plan | None:
    """The plan an install makes, when every archive it fetches is known by its digest (None: an
    archive the release does not publish, or one whose digest is not known yet, such as a ``--from``
    file without ``--sha256``: such an install is never taken as one already here)."""
    first = first_published(plans)
    if first is None or not first.assets or any(not a.sha256 for a in first.assets):
        return None
    return first


def same_archives(plan: Plan, receipt: Receipt) -> bool:
    """Whether the install ``receipt`` records came from every archive ``plan`` fetches (by digest),
    tested as ``plan`` is: installing ``plan`` again would change nothing."""
    return {a.sha256 for a in plan.assets} <= {s.sha256 for s in receipt.sources} and receipt.tested == plan.tested


def same_install(plan: Plan, installs: Iterable[Installed]) -> Receipt | None:
    """The receipt of the install among ``installs`` that ``plan`` would make again from the same bytes
    (its name, whole, its receipt recording every archive ``plan`` fetches by digest, tested as ``plan``
    is), or None: install it. A plan with an archive whose digest is not known is never the same."""
    if first_known([plan]) is not plan:
        return None
    there = next((i for i in installs if i.name == plan.install and i.ok), None)
    if there is None or there.receipt is None or not same_archives(plan, there.receipt):
        return None
    return there.receipt
