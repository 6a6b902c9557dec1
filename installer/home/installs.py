"""The installs of a runtime as they are on disk, read-only, and the one verdict of an install.

See docs/cli.md, "What an install is".
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.fixes import Fix, remedy, repair
from superfluid.runtime.kernel.jsonread import read_bytes
from superfluid.runtime.kernel.layout import PINNED, current_target, installs_in, is_install_entry, runtime_dir
from superfluid.runtime.kernel.ordering import backend_rank, version_key
from superfluid.runtime.kernel.receipt import RECEIPT, Receipt, read_receipt
from superfluid.runtime.kernel.record import Difference, glance
from superfluid.runtime.planning import is_install_name
from superfluid.runtime.registry import meant

__all__ = ["BadName", "Installed", "State", "STATES", "Verdict", "check_runtime_id", "check_install_name",
           "runtime_root", "list_installs", "judge", "judge_all", "refusal", "read_pinned",
           "default_install", "current_install", "current_problem"]

State = Literal["ready", "untested", "changed", "broken", "not for this host"]
#: every word of the verdict, in the order a worse one wins
STATES: tuple[State, ...] = ("broken", "changed", "not for this host", "untested", "ready")

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


# --- the verdict ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an install is (``state``), why when it is not ready, and what fixes it: the commands
    (``fixes``) and, where no command does, ``advice``."""

    install: str
    state: State
    why: str | None = None
    fixes: tuple[Fix, ...] = ()
    advice: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def refused(self) -> bool:
        """Whether nothing is served from it (changed or broken: ``serve`` exits 4, ``use`` refuses it)."""
        return self.state in ("changed", "broken")

    def words(self) -> str:
        """``0.4.0-cpu is changed: <why>``, or ``0.4.0-cpu is ready``."""
        return f"{self.install} is {self.state}" + (f": {self.why}" if self.why else "")

    def remedy(self) -> str:
        """What fixes it, for people: its advice, then its commands, "; or " between (as an error
        says them); "" when nothing does."""
        return remedy(self.advice, self.fixes)


def _glanced(installed: Installed) -> tuple[Difference, ...] | str:
    """What a glance finds different (``record.glance``: no file is read), or why the receipt's
    list of files does not read."""
    assert installed.receipt is not None
    try:
        return glance(installed.receipt, installed.path)
    except SuperfluidError as e:
        return f"its receipt does not read ({e})"


def _said(differences: Sequence[Difference]) -> str:
    gone = [d.path for d in differences if d.change == "missing"]
    said = ([f"missing {', '.join(gone[:3])}{f' and {len(gone) - 3} more' if len(gone) > 3 else ''}"] if gone else [])
    said += [d.describe() for d in differences if d.change != "missing"][:2]  # a glance finds no "added"
    return "; ".join(said)


def _changed_fixes(runtime_id: str, install: str) -> tuple[Fix, ...]:
    """Repair puts a changed install back; verify hashes it, and records it as it is now when every
    file holds (a home copied elsewhere: the same bytes, new inodes)."""
    return (repair(runtime_id, install),
            Fix.superfluid("runtime", "verify", runtime_id, install,
                           does="hashes its files and, when each is as recorded, records them as they are now"))


def refusal(installed: Installed, runtime_id: str | None = None) -> tuple[State, str] | None:
    """``broken`` or ``changed`` (nothing is served from it) and why, or None: the part of ``judge``
    decided by the receipt and a glance (``record.glance``: no file is read, so a changed byte is
    ``runtime verify``'s to find), for a caller that holds the install alone. ``runtime_id`` None: a
    receipt of another runtime is not looked for."""
    receipt = installed.receipt
    if receipt is None:
        return "broken", installed.problem or "its receipt does not read"
    if runtime_id is not None and receipt.id != runtime_id:
        return "broken", f"its receipt describes {receipt.id} {receipt.install}"
    differences = _glanced(installed)
    if isinstance(differences, str):
        return "broken", differences
    if differences:
        return "broken" if any(d.breaks for d in differences) else "changed", _said(differences)
    return None


def _untested(runtime_id: str, installed: Installed, others: Sequence[Installed], serving: str | None) -> Verdict:
    """An untested install, and the install this superfluid drives to use instead: one installed
    (when ``installed`` is the one served, ``serving``), else a new one."""
    r = installed.receipt
    assert r is not None
    stated = f"; its library states ABI {r.abi}" if r.abi is not None else ""
    why = f"installed with --untested{stated}: this superfluid does not drive it"
    drives = [o for o in others if o.name != installed.name and o.receipt is not None and o.receipt.tested
              and refusal(o) is None]
    if not drives:
        return Verdict(installed.name, "untested", why, (Fix.superfluid(
            "runtime", "install", runtime_id, does="installs the newest build this superfluid drives"),))
    if serving != installed.name:
        return Verdict(installed.name, "untested", why)
    other = drives[0].name
    return Verdict(installed.name, "untested", why, (Fix.superfluid(
        "runtime", "use", runtime_id, other, does=f"makes {other}, which it drives, the default"),),
        advice=f"--runtime {runtime_id}@{other} serves {other}, which it drives")


def judge(runtime_id: str, installed: Installed, others: Sequence[Installed], *, platform: str,
          serving: str | None = None) -> Verdict:
    """The one verdict of ``installed`` (the module doc): ``others`` are the runtime's installs
    (``list_installs``), ``serving`` the one served (``current``, ``--runtime ID@INSTALL``, the one
    ``use`` pins): an untested one served names the install this superfluid drives; ``platform``:
    this host's (``hostfacts.system.host_platform``, read at the face). Reads the receipt and a glance at the files: no
    file is read, no worker started."""
    name = installed.name
    refused = refusal(installed, runtime_id)
    if refused is not None:
        state, why = refused
        return Verdict(name, state, why, _changed_fixes(runtime_id, name) if state == "changed" else
                       (repair(runtime_id, name),))
    assert installed.receipt is not None
    made_for = installed.receipt.platforms[0] if installed.receipt.platforms else None
    if made_for is not None and made_for != platform:
        return Verdict(name, "not for this host", f"it was installed for {made_for}; this host is {platform}",
                       advice=f"install {runtime_id} again on this host")
    if not installed.receipt.tested:
        return _untested(runtime_id, installed, others, serving)
    return Verdict(name, "ready")


def judge_all(root: str | os.PathLike[str], runtime_id: str, *, platform: str,
              serving: str | None = None) -> list[tuple[Installed, Verdict]]:
    """Every install of the runtime at ``root`` (``list_installs``' order) with its verdict."""
    found = list_installs(root)
    return [(i, judge(runtime_id, i, found, serving=serving, platform=platform)) for i in found]


def read_pinned(root: str | os.PathLike[str]) -> str | None:
    """The install named by ``pinned`` (whether or not it exists), or None."""
    try:  # a regular file only: a FIFO or a link to a device is no pin (and never waited on)
        name = read_bytes(os.path.join(root, PINNED), max_bytes=4096).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name or None


def default_install(root: str | os.PathLike[str], *, leaving: Collection[str] = ()) -> str | None:
    """The pinned install if it exists and reads, else the best-ranked whole one (no ``refusal``: what
    ``runtime list`` calls ready), else the best-ranked readable one, else None; installs named in
    ``leaving`` (about to be removed) are not candidates. A pin is the user's word: a pinned install
    broken at a glance stays the default, and ``serve`` and ``runtimes`` name its repair."""
    readable = [i for i in list_installs(root) if i.ok and i.name not in leaving]
    pinned = read_pinned(root)
    if pinned in {i.name for i in readable}:
        return pinned
    whole = [i for i in readable if refusal(i) is None]
    return (whole or readable)[0].name if readable else None


def current_install(root: str | os.PathLike[str]) -> str | None:
    """The install ``current`` points at, or None (absent, or not a good link: ``current_problem``)."""
    return current_target(root)[0]


def current_problem(root: str | os.PathLike[str]) -> str | None:
    """Why ``current`` is not a link to an install of the runtime (dangling, a loop, out of the
    runtime's folder, a file, a directory), or None."""
    return current_target(root)[1]
