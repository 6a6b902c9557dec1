"""The installs of a runtime as they are on disk, read-only: their names, the ones there in default
order, why one is broken at a glance, which ``current`` and ``pinned`` name. The installer changes
them (``superfluid.installer.home.store``); every command that only looks reads them here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.jsonread import read_bytes
from superfluid.runtime.kernel.layout import PINNED, current_target, installs_in, is_install_entry, runtime_dir
from superfluid.runtime.kernel.ordering import backend_rank, version_key
from superfluid.runtime.kernel.receipt import RECEIPT, Receipt, read_receipt
from superfluid.runtime.kernel.record import glance
from superfluid.runtime.planning import is_install_name
from superfluid.runtime.registry import meant

__all__ = ["BadName", "Installed", "check_runtime_id", "check_install_name", "runtime_root", "list_installs",
           "fault", "read_pinned", "default_install", "current_install", "current_problem"]

_RUNTIME_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")


class BadName(UsageError):
    """A runtime id or install name that cannot name a directory of the home (exit 2)."""


@dataclass(frozen=True, slots=True)
class Installed:
    """One install directory: its receipt, or why it has none that reads (then it is broken)."""

    name: str
    path: Path
    receipt: Receipt | None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.receipt is not None


# --- names and ranking (pure) -------------------------------------------------------------------


def check_runtime_id(runtime_id: str) -> str:
    """``runtime_id`` if it is a plain runtime id (lowercase letters, digits, ``.``, ``-``, ``_``).

    Raises:
        BadName: it is not.
    """
    if not _RUNTIME_ID.fullmatch(runtime_id):
        raise BadName(f"{runtime_id!r} is not a runtime id (lowercase letters, digits, '.', '-', '_')"
                      f"{meant(runtime_id)}")
    return runtime_id


def check_install_name(install: str) -> str:
    """``install`` if it can name an install directory: not empty, not starting with ``.``, only
    ASCII letters, digits and ``. - _ +``, and neither ``current`` nor ``pinned``.

    Raises:
        BadName: it cannot.
    """
    if not is_install_name(install) or not is_install_entry(install):
        raise BadName(f"{install!r} is not an install name (letters, digits, '.', '-', '_', '+'; "
                      "not starting with '.'; not 'current' or 'pinned')")
    return install


def runtime_root(home: str | os.PathLike[str], runtime_id: str) -> Path:
    """``$SUPERFLUID_HOME/runtimes/<id>``.

    Raises:
        BadName: ``runtime_id`` is not a runtime id.
    """
    return Path(runtime_dir(home, check_runtime_id(runtime_id)))


def _order(installed: Installed) -> tuple[Any, ...]:
    r = installed.receipt
    if r is None:
        return (1, 0, 0, (), installed.name)
    # a tested install outranks an untested one: --untested installs what was asked, but a later
    # tested install becomes the default rather than an engine this build may not drive
    return (0, 0 if r.tested else 1, backend_rank(r.backend), _Desc(version_key(r.version)), installed.name)


class _Desc:
    """Reverses the order of a key (newest version first inside an ascending sort)."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return bool(self.key > other.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key


# --- the installs on disk -------------------------------------------------------------------------


def list_installs(root: str | os.PathLike[str]) -> list[Installed]:
    """Every install directory of the runtime at ``root`` (``installs_in``), readable ones first in
    default order (backend rank, newest version, name), then the broken ones (no receipt that
    reads, or one naming another install) by name."""
    found: list[Installed] = []
    for name in installs_in(root):
        path = Path(root) / name
        try:
            receipt = read_receipt(path / RECEIPT)
        except SuperfluidError as e:
            found.append(Installed(name, path, None, str(e)))
            continue
        if receipt.install != name:
            found.append(Installed(name, path, None, f"{path / RECEIPT}: describes the install "
                                                     f"{receipt.install!r}, not {name!r}"))
            continue
        found.append(Installed(name, path, receipt))
    return sorted(found, key=_order)


def fault(installed: Installed) -> str | None:
    """Why ``installed`` is broken, in words, or None: its receipt does not read, or a file it records
    is missing or not as recorded at a glance (``record.glance``: no file is read, so a changed byte
    is ``runtime verify``'s to find)."""
    if installed.receipt is None:
        return installed.problem or "its receipt does not read"

    try:
        differences = glance(installed.receipt, installed.path)
    except SuperfluidError as e:
        return f"its receipt does not read ({e})"
    if not differences:
        return None
    gone = [d.path for d in differences if d.change == "missing"]
    said = ([f"missing {', '.join(gone[:3])}{f' and {len(gone) - 3} more' if len(gone) > 3 else ''}"] if gone else [])
    said += [d.describe() for d in differences if d.change != "missing"][:2]  # a glance finds no "added"
    return "; ".join(said)


def read_pinned(root: str | os.PathLike[str]) -> str | None:
    """The install named by ``pinned`` (whether or not it exists), or None."""
    try:  # a regular file only: a FIFO or a link to a device is no pin (and never waited on)
        name = read_bytes(os.path.join(root, PINNED), max_bytes=4096).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name or None


def default_install(root: str | os.PathLike[str], *, leaving: Collection[str] = ()) -> str | None:
    """The pinned install if it exists and reads, else the best-ranked whole one (no ``fault``: what
    ``runtime list`` calls ready), else the best-ranked readable one, else None; installs named in
    ``leaving`` (about to be removed) are not candidates. A pin is the user's word: a pinned install
    broken at a glance stays the default, and ``serve`` and ``runtimes`` name its repair."""
    readable = [i for i in list_installs(root) if i.ok and i.name not in leaving]
    pinned = read_pinned(root)
    if pinned in {i.name for i in readable}:
        return pinned
    whole = [i for i in readable if fault(i) is None]
    return (whole or readable)[0].name if readable else None


def current_install(root: str | os.PathLike[str]) -> str | None:
    """The install ``current`` points at, or None (absent, or not a good link: ``current_problem``)."""
    return current_target(root)[0]


def current_problem(root: str | os.PathLike[str]) -> str | None:
    """Why ``current`` is not a link to an install of the runtime (dangling, a loop, out of the
    runtime's folder, a file, a directory), or None."""
    return current_target(root)[1]
