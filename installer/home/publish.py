"""Where an install lands: staged beside the installs, probed, then published by one rename.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from superfluid.installer.files import remove_tree
from superfluid.installer.home.installs import check_install_name, current_install, read_pinned, runtime_root
from superfluid.installer.home.launcher import write_worker_launcher
from superfluid.installer.home.store import StoreError, clean_stale, guard_root, make_staging, publish, refresh_current
from superfluid.installer.mutex import MutexOwner, install_mutex
from superfluid.runtime.kernel.layout import CURRENT, LIB, worker_path
from superfluid.runtime.kernel.receipt import RECEIPT, Receipt, now_utc, write_receipt
from superfluid.runtime.kernel.record import with_files

__all__ = ["Published", "install_staged"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Published:
    """What ``install_staged`` did, for the face's completion lines."""

    receipt: Receipt
    path: Path  # the published install directory
    replaced: bool  # an install of that name existed and was replaced ("replacing the one of that name")
    current: str | None  # the default install now (``current`` points at it)
    pinned: str | None  # the pinned install, if any
    cleaned: tuple[str, ...] = ()  # leftovers of dead writers removed first
    kept: bool = False  # the install was there already (``install_staged``'s ``kept``): nothing was changed


def _check_receipt(receipt: Receipt, runtime_id: str, install: str) -> None:
    faults = []
    if receipt.id != runtime_id:
        faults.append(f"id {receipt.id!r}, not {runtime_id!r}")
    if receipt.install != install:
        faults.append(f"install {receipt.install!r}, not {install!r}")
    if receipt.worker != worker_path(runtime_id):
        faults.append(f"worker {receipt.worker!r}, not {worker_path(runtime_id)!r}")
    if faults:
        raise StoreError(f"the receipt made for {runtime_id} {install} says " + "; ".join(faults))


def _check_staged(staging: Path, receipt: Receipt) -> None:
    worker = staging / receipt.worker
    if not worker.is_file() or not os.access(worker, os.X_OK):
        raise StoreError(f"the staged install has no runnable worker at {worker}")


def _describe(staging: Path, receipt: Receipt, runtime_id: str, install: str) -> Receipt:
    """Write the receipt of the staged install (``installed_at`` now when None), recording every
    staged file, once it is known to describe this install and the staged worker is there to run."""
    if receipt.installed_at is None:
        receipt = replace(receipt, installed_at=now_utc())
    _check_receipt(receipt, runtime_id, install)

    receipt = with_files(receipt, staging)  # every staged file, for `runtime verify` (runtime/kernel/record.py)
    write_receipt(staging / RECEIPT, receipt)
    _check_staged(staging, receipt)
    return receipt


def install_staged(
    home: str | os.PathLike[str],
    runtime_id: str,
    install: str,
    stage: Callable[[Path], Receipt | None],
    probe: Callable[[Path], Receipt | None],
    *,
    lock_timeout: float = 600.0,
    on_wait: Callable[[MutexOwner], None] | None = None,
    command: str | None = None,
    kept: Callable[[Path], Receipt | None] | None = None,
) -> Published:
    """Install ``<home>/runtimes/<id>/<install>`` from a staging directory, atomically: stage →
    probe → receipt → publish.

    ``stage(staging)`` fills the staging directory (``staging/lib`` and ``staging/bin`` exist, the
    worker launcher is written and may be replaced). ``probe(staging)`` then checks the staged
    library (a worker subprocess) and raises to refuse it. The receipt is what the probe answers,
    made of its verdict (the installer's case); when the staged files alone describe the install,
    ``stage`` answers it instead and it is written before the probe runs (a probe that answers one
    too replaces it). ``kept(root)`` is asked first, under the lock: a receipt it answers is that of the
    install already there (another process installed the same archives while this one waited), and
    nothing is staged or changed. The receipt must name ``runtime_id``, ``install`` and ``bin/superfluid-worker-<id>``,
    and is written to ``staging/runtime.json``, ``installed_at`` set to now when it is None. Only
    then is the staging renamed into place, replacing an install of that name, and ``current``
    pointed at the default install (the pinned one, else the best-ranked).

    Raises:
        BadName: a bad runtime id or install name (before anything is touched).
        MutexBusy: another process held the lock past ``lock_timeout`` seconds.
        StoreError: a filesystem fault, or no receipt, or one that does not describe this install.
        Whatever ``stage`` or ``probe`` raise (UnsafeArchive, ProbeRefused, WorkerFailed, …):
            the staging is deleted, installs are as they were.
    """
    check_install_name(install)
    root = runtime_root(home, runtime_id)
    guard_root(root)
    with install_mutex(root, timeout=lock_timeout, on_wait=on_wait, command=command):
        try:
            cleaned = tuple(clean_stale(root))
            there = kept(root) if kept is not None else None
            if there is not None:  # installed while this one waited: nothing to do (issue 42, item 5)
                return Published(receipt=there, path=root / install, replaced=False, current=current_install(root),
                                 pinned=read_pinned(root), cleaned=cleaned, kept=True)
            staging = make_staging(root, install)
        except OSError as e:
            raise StoreError(f"could not prepare {root}: {e.strerror or e}",
                             advice="check the permissions and free space of SUPERFLUID_HOME") from e
        try:
            (staging / LIB).mkdir()
            write_worker_launcher(staging, runtime_id)
            receipt = stage(staging)
            if receipt is not None:  # described by what was staged: in place for the probe to see
                receipt = _describe(staging, receipt, runtime_id, install)
            judged = probe(staging)
            if judged is not None:
                receipt = _describe(staging, judged, runtime_id, install)
            if receipt is None:
                raise StoreError(f"nothing described the staged {runtime_id} {install}: it has no receipt")
            replaced = publish(root, staging, install)
        except BaseException as e:
            remove_tree(staging)
            if isinstance(e, OSError):
                raise StoreError(f"could not install {runtime_id} {install}: {e.filename or root}: "
                                 f"{e.strerror or e}",
                                 advice="check the permissions and free space of SUPERFLUID_HOME") from e
            raise
        try:
            chosen = refresh_current(root)
        except OSError as e:
            raise StoreError(f"{runtime_id} {install} is installed, but {root / CURRENT} could not be "
                             f"updated: {e.strerror or e}",
                             advice=f"the install is in place; make {root} writable, and the next change of "
                             f"{runtime_id} points {CURRENT} at its default install") from e
    return Published(receipt=receipt, path=root / install, replaced=replaced,
                     current=chosen if chosen else current_install(root),
                     pinned=read_pinned(root), cleaned=cleaned)
