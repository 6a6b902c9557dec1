"""``superfluid runtime gc <id>``: remove the installs a runtime no longer needs.

See docs/install.md, "Collecting old installs".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from superfluid.installer.cache.prune import InUse
from superfluid.installer.home import installs, store
from superfluid.installer.home.installs import current_install, judge, list_installs, read_pinned
from superfluid.installer.mutex import install_mutex
from superfluid.runtime.kernel.layout import runtimes_dir
from superfluid.runtime.kernel.ordering import version_key

if TYPE_CHECKING:
    from superfluid.installer.home.installs import Installed
    from superfluid.installer.mutex import MutexOwner

__all__ = ["Candidate", "Decision", "Collected", "choose", "candidates", "collect", "in_use"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the rule needs of one install: its name, version and install time (None: its receipt
    does not read), and whether this superfluid drives it (``tested``; false: installed with
    ``--untested``)."""

    name: str
    version: str | None
    installed_at: str | None = None
    tested: bool = True
    #: its verdict's word (``installs.judge``), as every command says it
    state: str = "ready"


@dataclass(frozen=True, slots=True)
class Decision:
    """The installs that stay, each with why, and those that go (in the order they are removed),
    each with why (``why_removed``)."""

    keep: tuple[tuple[str, str], ...]
    remove: tuple[str, ...]
    why_removed: tuple[tuple[str, str], ...] = ()


def _newest_first(found: Sequence[Candidate]) -> list[Candidate]:
    """The readable installs in the order ``--keep`` counts them: those this superfluid drives first
    (an untested install is kept only after them: it may not run with this superfluid), then the
    newest version, the latest installed, the name."""
    readable = [c for c in found if c.version is not None]
    by_name = sorted(readable, key=lambda c: c.name)
    by_time = sorted(by_name, key=lambda c: c.installed_at or "", reverse=True)
    by_version = sorted(by_time, key=lambda c: version_key(c.version or ""), reverse=True)
    return sorted(by_version, key=lambda c: not c.tested)


def choose(found: Sequence[Candidate], *, keep: int, current: str | None = None, pinned: str | None = None,
           locked: Mapping[str, str] | None = None) -> Decision:
    """Which installs a collection keeps (see the module doc). ``locked``: install name -> the
    lock file that names it.

    Raises:
        ValueError: ``keep`` is negative.
    """
    if keep < 0:
        raise ValueError(f"keep {keep}: not a count")
    locked = locked or {}
    newest = [c.name for c in _newest_first(found)][:keep]
    drives = sum(1 for c in found if c.version is not None and c.tested)
    kept: list[tuple[str, str]] = []
    gone: list[tuple[str, str]] = []
    for c in sorted(found, key=lambda c: c.name):
        newest_words = f"one of the newest {keep}" + ("" if c.tested else ", counted after the installs this "
                                                                           "superfluid drives")
        why = [w for w, yes in ((newest_words, c.name in newest), ("current", c.name == current),
                                ("pinned", c.name == pinned), (f"named by {locked.get(c.name)}", c.name in locked),
                                ("its receipt does not read", c.version is None)) if yes]
        if why:
            kept.append((c.name, ", ".join(why)))
        elif not c.tested and drives:
            gone.append((c.name, f"this superfluid does not drive it, and the newest {keep} count the "
                                 f"installs it drives first"))
        else:
            gone.append((c.name, f"not one of the newest {keep}"))
    return Decision(tuple(kept), tuple(n for n, _ in gone), tuple(gone))


def candidates(installed: Sequence[Installed], runtime_id: str, *, platform: str,
               current: str | None = None) -> list[Candidate]:
    """The rule's view of ``installs.list_installs``, each with its verdict's word (``installs.judge``
    on this host's ``platform``)."""
    return [Candidate(i.name, i.receipt.version if i.receipt else None, i.receipt.installed_at if i.receipt else None,
                      i.receipt.tested if i.receipt else True,
                      judge(runtime_id, i, installed, serving=current, platform=platform).state)
            for i in installed]


@dataclass(frozen=True, slots=True)
class Collected:
    """What ``collect`` did (``dry_run``: would do), for the face."""

    id: str
    decision: Decision
    dry_run: bool
    current: str | None
    keep: int
    #: each install's verdict's word (``installs.judge``), by name
    states: tuple[tuple[str, str], ...] = ()

    def state(self, install: str) -> str:
        return dict(self.states).get(install, "ready")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "dry_run": self.dry_run, "keep": self.keep, "removed": list(self.decision.remove),
                "kept": [{"install": n, "state": self.state(n), "why": w} for n, w in self.decision.keep],
                "current": self.current,
                "why_removed": [{"install": n, "state": self.state(n), "why": w} for n, w in self.decision.why_removed]}


def collect(home: str, runtime_id: str, *, keep: int, platform: str, dry_run: bool = False,
            locked: Mapping[str, str] | None = None, timeout: float = 600.0,
            on_wait: Callable[[MutexOwner], None] | None = None) -> Collected:
    """Remove the installs of ``runtime_id`` that ``choose`` does not keep, holding the runtime's
    install lock (what dead writers left is cleaned first, as every change does); ``dry_run``
    decides the same and changes nothing; ``platform``: this host's, as the verdict judges an install
    (``hostfacts.system.host_platform``, read at the face).

    Raises:
        BadName: a bad runtime id.
        MutexBusy, StoreError: as ``install_mutex``; a filesystem fault.
    """

    root = installs.runtime_root(home, runtime_id)
    store.guard_root(root)
    if dry_run or not os.path.isdir(root):  # nothing installed: no lock is taken, nothing is written
        return _decide(runtime_id, root, keep, locked, platform, dry_run=dry_run)
    with install_mutex(root, timeout=timeout, on_wait=on_wait, command=f"superfluid runtime gc {runtime_id}"):
        try:
            store.clean_stale(root)
            done = _decide(runtime_id, root, keep, locked, platform, dry_run=False)
            if done.decision.remove:
                left = store.remove_installs(root, done.decision.remove)
                done = Collected(runtime_id, done.decision, False, left, keep, done.states)
        except OSError as e:
            raise store.StoreError(f"could not collect {runtime_id}: {e.filename or root}: {e.strerror or e}",
                                   advice="check the permissions and free space of SUPERFLUID_HOME") from e
    return done


def _decide(runtime_id: str, root: Any, keep: int, locked: Mapping[str, str] | None, platform: str, *,
            dry_run: bool) -> Collected:
    current = current_install(root)
    found = candidates(list_installs(root), runtime_id, platform=platform, current=current)
    decision = choose(found, keep=keep, current=current, pinned=read_pinned(root), locked=locked)
    return Collected(runtime_id, decision, dry_run, current, keep, tuple((c.name, c.state) for c in found))


def in_use(home: str) -> InUse:
    """What the installs of every runtime still need of the cache: the digests each receipt's
    ``sources`` names, and how many installs that is (an install whose receipt does not read names
    nothing). A cache prune keeps them."""

    top = runtimes_dir(home)
    try:
        ids = sorted(os.listdir(top)) if not os.path.islink(top) else []
    except (FileNotFoundError, NotADirectoryError):
        ids = []
    needed: set[str] = set()
    count = 0
    for runtime_id in ids:
        root = os.path.join(top, runtime_id)
        if runtime_id.startswith(".") or os.path.islink(root) or not os.path.isdir(root):
            continue
        for install in list_installs(root):
            if install.receipt is not None:
                count += 1
                needed.update(s.sha256 for s in install.receipt.sources if s.sha256)
    return InUse(frozenset(needed), count)
