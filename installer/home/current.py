"""``current`` put back before a repair when it names no install of the runtime, changing no install.

See docs/cli.md, ``superfluid runtime repair``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from superfluid.installer.errors import StoreError
from superfluid.installer.home.installs import current_problem, default_install, read_pinned
from superfluid.installer.home.store import clean_stale, point_current
from superfluid.installer.mutex import install_mutex
from superfluid.runtime.kernel.layout import CURRENT, installs_in

if TYPE_CHECKING:
    from superfluid.installer.mutex import MutexOwner

__all__ = ["CurrentPutBack", "put_current_back"]


@dataclass(frozen=True, slots=True)
class CurrentPutBack:
    """What a repair did to ``current``: what it was (``was``, why it was no link to an install), the
    install it names now (``names``), why that one (``chosen``: the pinned install, else the
    best-ranked, as ``runtime use --auto`` chooses), and where a file or directory found in its place
    was kept (``kept``, None when it was a link or nothing)."""

    runtime_id: str
    was: str
    names: str
    chosen: Literal["pinned", "best-ranked"]
    kept: Path | None = None

    def words(self) -> str:
        """``current of basert named no install (<was>); it now names 0.4.0-cpu, the best-ranked
        install``, and where what stood there is kept."""
        kept = f"; what stood there is kept as {self.kept}" if self.kept is not None else ""
        return (f"current of {self.runtime_id} named no install ({self.was}); it now names {self.names}, "
                f"the {self.chosen} install{kept}")

    def to_json(self) -> dict[str, Any]:
        return {"was": self.was, "names": self.names, "chosen": self.chosen,
                "kept": str(self.kept) if self.kept is not None else None}


def put_current_back(runtime_id: str, root: str | os.PathLike[str], *, timeout: float = 600.0,
                     on_wait: Callable[[MutexOwner], None] | None = None) -> CurrentPutBack | None:
    """Under the runtime's lock, what a killed writer left goes (``store.clean_stale``), then a
    ``current`` that names no install of the runtime (``installs.current_problem``, or none at all
    while installs are there) is pointed at the default install (``installs.default_install``: the
    pinned one, else the best-ranked whole one), in one rename (``store.point_current``, which keeps
    a file or a directory found in its place). No install is read past its receipt and a glance,
    and none is changed. Answers what was done, or None: ``current`` names an install already, the
    runtime has no folder, or no install has a receipt that reads (``current`` is left as it is; a
    repair of an install points it when it is whole again).

    Raises:
        MutexBusy, StoreError: as ``install_mutex``; the runtime's folder cannot be changed.
    """
    root_s = os.fspath(root)
    if not os.path.isdir(root_s):
        return None
    with install_mutex(root_s, timeout=timeout, on_wait=on_wait):
        try:
            return _put_back(runtime_id, root_s)
        except OSError as e:
            raise StoreError(f"could not put current of {runtime_id} back: {e.filename or root_s}: "
                             f"{e.strerror or e}",
                             advice="check the permissions and free space of SUPERFLUID_HOME") from e


def _put_back(runtime_id: str, root: str) -> CurrentPutBack | None:
    """``put_current_back``'s work, holding the lock."""
    clean_stale(root)
    was = current_problem(root)
    if was is None and (os.path.lexists(os.path.join(root, CURRENT)) or not installs_in(root)):
        return None
    chosen = default_install(root)
    if chosen is None:
        return None
    kept = point_current(root, chosen)
    return CurrentPutBack(runtime_id, was or f"{os.path.join(root, CURRENT)} is missing", chosen,
                          "pinned" if read_pinned(root) == chosen else "best-ranked", kept)
