"""Changing the installs of a runtime: staging, publishing, listing, ``current`` and ``pinned``.

See docs/install.md, "Managing installs".
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from superfluid.installer.errors import StoreError
from superfluid.installer.files import remove_tree, writer_alive
from superfluid.installer.home.exchange import exchange as _exchange  # a name the tests replace
from superfluid.installer.home.hints import install_it, list_them
from superfluid.installer.home.installs import (
    check_install_name,
    current_install,
    default_install,
    list_installs,
    read_pinned,
    refusal,
    runtime_root,
)
from superfluid.installer.mutex import MutexOwner, install_mutex
from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.fixes import repair
from superfluid.runtime.kernel.layout import CURRENT, PINNED, installs_in

__all__ = [
    "StoreError",
    "NoSuchInstall",
    "guard_root",
    "clean_stale",
    "settle",
    "make_staging",
    "publish",
    "point_current",
    "refresh_current",
    "write_pinned",
    "set_aside",
    "pin",
    "unpin",
    "remove",
    "remove_installs",
]


# names a writer leaves while it works: kind, then (for the first three) the install, pid, 64 random bits
_TEMP = re.compile(r"\.(?P<kind>staging|old|removing)-(?P<install>.+)-(?P<pid>\d+)-[0-9a-f]{16}"
                   r"|\.(?P<kind2>current-new|pinned-new)-(?P<pid2>\d+)-[0-9a-f]{16}"
                   r"|\.(?P<kind3>staging|current-new)-\d+")  # the daemon's own, `.staging-<u64>`


class NoSuchInstall(StoreError):
    """A named install does not exist (or the runtime has none)."""


def guard_root(root: str | os.PathLike[str]) -> None:
    """Refuse to change a runtime whose folder (or ``runtimes/``) is a symbolic link: installs,
    ``current`` and the lock would be written wherever it points, outside the home. (The home
    itself may be a link: it is where the user points.)

    Raises:
        StoreError: one of them is a link (names it).
    """
    for path in (os.path.dirname(os.fspath(root)), os.fspath(root)):
        if os.path.islink(path):
            raise StoreError(f"{path} is a symbolic link (to {os.readlink(path)}); superfluid writes nothing "
                             "through a link inside SUPERFLUID_HOME",
                             advice=f"remove the link {path} (or point SUPERFLUID_HOME at the directory it names)")


def _temp_name(kind: str, install: str | None = None) -> str:
    mid = f"{install}-" if install is not None else ""
    return f".{kind}-{mid}{os.getpid()}-{secrets.token_hex(8)}"


def clean_stale(root: str | os.PathLike[str]) -> list[str]:
    """Remove what dead writers left in ``root`` and put back an install set aside mid-replacement.
    Call it holding the lock. An entry whose pid is alive (another pid namespace, a reused pid) is
    left alone. Returns the names acted on.

    Raises:
        OSError: the directory cannot be changed.
    """
    done: list[str] = []
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return done
    for name in names:
        m = _TEMP.fullmatch(name)
        if m is None:
            continue
        pid = m.group("pid") or m.group("pid2")
        if pid is not None and writer_alive(int(pid)):
            continue
        path = os.path.join(root, name)
        install = m.group("install")
        if m.group("kind") == "old" and install and not os.path.lexists(os.path.join(root, install)):
            os.rename(path, os.path.join(root, install))  # killed between the two renames of publish
        else:
            remove_tree(path)
        done.append(name)
    return done


def settle(root: str | os.PathLike[str]) -> list[str]:
    """Finish or undo what a killed writer of ``root`` left half done, then clean up after it; call
    it holding the lock (every command that takes it does, before it reads the installs).

    ``clean_stale`` first (an install set aside mid-replacement is put back; the staging folders,
    ``.current-new-*`` links and other names of dead writers go), then ``current`` is pointed again
    at the default install (``refresh_current``): a publish killed after its install was renamed
    into place, but before ``current`` was switched to it, ends as it would have. ``current`` is
    always the default (the pinned install, else the best one), so this changes nothing else.
    Answers the names acted on (``current`` among them when it moved).

    Raises:
        OSError: the directory cannot be changed.
    """
    done = clean_stale(root)
    before = current_install(root)
    if refresh_current(root) != before:
        done.append(CURRENT)
    return done


def make_staging(root: str | os.PathLike[str], install: str) -> Path:
    """A fresh, empty staging directory in ``root`` (so on the install's filesystem).

    Raises:
        BadName: ``install`` is not an install name.
        OSError: it cannot be made.
    """
    path = Path(root) / _temp_name("staging", check_install_name(install))
    os.mkdir(path, 0o755)  # mkdir, never makedirs: a planted name is an error, not reused
    return path


# --- publishing ------------------------------------------------------------------------------------

def _fsync_dir(path: str | os.PathLike[str]) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def publish(root: str | os.PathLike[str], staging: str | os.PathLike[str], install: str) -> bool:
    """Make the staged directory the install ``<root>/<install>``; True if one was replaced.

    A new name is one ``rename``. An existing install is swapped with the staged one in one atomic
    exchange where the kernel has it (then the old copy, now at the staging name, is deleted);
    elsewhere it is renamed aside to ``.old-…`` first, and a crash between the two renames is
    undone by the next ``clean_stale``. Call it holding the lock.

    Raises:
        OSError: a rename failed (the staged directory and any old install are left as they were).
    """
    target = os.path.join(root, check_install_name(install))
    staging_s = os.fspath(staging)
    if not os.path.lexists(target):
        os.rename(staging_s, target)
        _fsync_dir(root)
        return False
    if _exchange(staging_s, target):
        _fsync_dir(root)
        remove_tree(staging_s)
        return True
    aside = os.path.join(root, _temp_name("old", install))
    os.rename(target, aside)
    try:
        os.rename(staging_s, target)
    except BaseException:
        os.rename(aside, target)
        raise
    _fsync_dir(root)
    remove_tree(aside)
    return True


# --- listing, default, current, pin -----------------------------------------------------------------

def _aside_name() -> str:
    """``.current-set-aside-<UTC time>-<random>``: where a file or directory found in ``current``'s
    place is kept. A dot name (no install, never listed) that ``_TEMP`` does not match: no writer
    ever deletes it."""
    return f".current-set-aside-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(4)}"


def point_current(root: str | os.PathLike[str], install: str) -> Path | None:
    """Make ``<root>/current`` a relative link to ``install``, atomically for readers; call it holding
    the lock. A link in its place (dangling, a loop, pointing anywhere) is replaced, its target never
    touched. Anything else there (a regular file, a directory: never what superfluid writes, so
    maybe the user's) is kept whole, renamed to ``_aside_name()``, and that path is returned (None:
    nothing was kept). Where the kernel swaps two names atomically, the new link is made at that
    name and swapped with it, so a kill at any point loses nothing.

    Raises:
        OSError: the directory cannot be changed.
    """
    root_s = os.fspath(root)
    target = os.path.join(root_s, CURRENT)
    if os.path.lexists(target) and not os.path.islink(target):
        aside = os.path.join(root_s, _aside_name())
        os.symlink(install, aside)
        try:
            swapped = _exchange(aside, target)
        except BaseException:
            os.unlink(aside)
            raise
        if not swapped:  # no atomic swap here: current is absent between the two renames
            os.unlink(aside)
            os.rename(target, aside)
            _replace_link(root_s, install, target)
        _fsync_dir(root_s)
        return Path(aside)
    _replace_link(root_s, install, target)
    return None


def _replace_link(root: str, install: str, target: str) -> None:
    tmp = os.path.join(root, _temp_name("current-new"))
    os.symlink(install, tmp)  # relative: the home can move
    try:
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def refresh_current(root: str | os.PathLike[str], *, leaving: Collection[str] = ()) -> str | None:
    """Point ``current`` at the default install (one atomic rename) and return it; installs named
    in ``leaving`` are about to be removed and are not chosen. Call it holding the lock.

    ``current`` moves only to a good install (one whose receipt reads). With none, it is left where
    it is when it names an install that stays (a broken one: repair it), and otherwise removed when
    it is a link (it names nothing that stays); ``pinned`` goes when it names a leaving install,
    or when no install stays at all. A ``current`` that is a file or a directory is replaced only
    by a good link, and kept aside (``point_current``).

    Raises:
        OSError: the directory cannot be changed.
    """
    root_s = os.fspath(root)
    pin = read_pinned(root_s)
    if pin is not None and pin in leaving:
        os.unlink(os.path.join(root_s, PINNED))
    chosen = default_install(root_s, leaving=leaving)
    if chosen is not None:
        if current_install(root_s) != chosen:
            point_current(root_s, chosen)
            _fsync_dir(root_s)
        return chosen
    staying = [n for n in installs_in(root_s) if n not in leaving]
    named = current_install(root_s)
    link = os.path.join(root_s, CURRENT)
    if (named is None or named in leaving) and os.path.islink(link):
        os.unlink(link)
    if not staying:
        remove_tree(os.path.join(root_s, PINNED))
    return None


def write_pinned(root: str | os.PathLike[str], install: str) -> None:
    """Write ``pinned`` (``"<install>\\n"``) whole (``write_atomic``, through a temp name
    ``clean_stale`` knows). Call it holding the lock.

    Raises:
        OSError: it cannot be written.
    """

    data = (check_install_name(install) + "\n").encode("utf-8")
    write_atomic(os.path.join(root, PINNED), data, temp=_temp_name("pinned-new"))


def set_aside(root: str | os.PathLike[str], install: str) -> Path:
    """Rename an install to ``.removing-<install>-<pid>-<rand>``: it is gone for readers at once,
    and if we die before deleting it, the next ``clean_stale`` finishes the job. Call it holding
    the lock.

    Raises:
        OSError: the rename failed.
    """
    aside = Path(root) / _temp_name("removing", check_install_name(install))
    os.rename(Path(root) / install, aside)
    return aside


# --- the commands' changes, each under the lock -------------------------------------------------

def _installed_names(root: str) -> str:
    names = [i.name for i in list_installs(root)]
    return ", ".join(names) if names else "none"


@contextmanager
def _changing(root: Path, what: str) -> Iterator[None]:
    """Turn a filesystem fault into a StoreError that names what was being done."""
    try:
        yield
    except OSError as e:
        where = e.filename or root
        raise StoreError(f"could not {what}: {where}: {e.strerror or e}",
                         advice="check the permissions and free space of SUPERFLUID_HOME") from e


def pin(home: str | os.PathLike[str], runtime_id: str, install: str, *, timeout: float = 600.0,
        on_wait: Callable[[MutexOwner], None] | None = None) -> str:
    """``runtime use <id> <install>``: pin the default install and point ``current`` at it.

    Raises:
        BadName: a bad id or install name.
        NoSuchInstall: ``install`` is not a readable install of the runtime.
        MutexBusy, StoreError: as ``install_mutex``; a filesystem fault.
    """
    root = runtime_root(home, runtime_id)
    check_install_name(install)
    guard_root(root)
    if not os.path.isdir(root):  # never installed: nothing to lock, and nothing written
        raise NoSuchInstall(f"{runtime_id} has no install {install} (installed: none)",
                            fix=install_it(runtime_id))
    with install_mutex(root, timeout=timeout, on_wait=on_wait), _changing(root, f"pin {runtime_id} {install}"):
        clean_stale(root)
        found = {i.name: i for i in list_installs(root)}
        if install not in found:
            raise NoSuchInstall(f"{runtime_id} has no install {install} (installed: {_installed_names(str(root))})",
                                fix=list_them(runtime_id))
        if (refused := refusal(found[install], runtime_id)) is not None:  # the verdict's word, and why
            raise NoSuchInstall(f"{runtime_id} {install} is {refused[0]} ({refused[1]}); it is not made the default",
                                fix=repair(runtime_id, install))
        write_pinned(root, install)
        chosen = refresh_current(root)
    return chosen or install


def unpin(home: str | os.PathLike[str], runtime_id: str, *, timeout: float = 600.0,
          on_wait: Callable[[MutexOwner], None] | None = None) -> str:
    """``runtime use <id> --auto``: drop the pin; ``current`` goes to the best-ranked install.

    Raises:
        NoSuchInstall: the runtime has no install.
        MutexBusy, StoreError: as ``install_mutex``; a filesystem fault.
    """
    root = runtime_root(home, runtime_id)
    guard_root(root)
    if not os.path.isdir(root):  # never installed: nothing to lock, and nothing written
        raise NoSuchInstall(f"{runtime_id} is not installed", fix=install_it(runtime_id))
    with install_mutex(root, timeout=timeout, on_wait=on_wait), _changing(root, f"unpin {runtime_id}"):
        clean_stale(root)
        found = list_installs(root)
        broken = [i for i in found if not i.ok]
        chosen = None
        if not found or len(broken) < len(found):  # a good install to point at (or nothing left to name)
            remove_tree(root / PINNED)  # whatever is there: a file, or something planted in its place
            chosen = refresh_current(root)
        left = current_install(root)
    if chosen is None and broken:
        where = f"; current still names {left}" if left else ""
        raise NoSuchInstall(f"no install of {runtime_id} reads ({'; '.join(i.problem or i.name for i in broken)})"
                            f"{where}", fix=[repair(runtime_id, i.name) for i in broken])
    if chosen is None:
        raise NoSuchInstall(f"{runtime_id} is not installed", fix=install_it(runtime_id))
    return chosen


def remove(home: str | os.PathLike[str], runtime_id: str, install: str | None = None, *,
           timeout: float = 600.0, on_wait: Callable[[MutexOwner], None] | None = None) -> tuple[list[str], str | None]:
    """``runtime remove <id> [<install>]``: delete one install (a broken one too), or all of them.
    First ``current`` and ``pinned`` stop naming them (``current`` moves to the default of the
    installs that stay), then each is renamed to ``.removing-…`` (it disappears at once for
    readers), then its files are deleted; a kill between any two steps leaves a consistent home, and
    the next writer deletes what was renamed. The lock file stays (a waiter may hold it open).
    Returns the names removed and the default install left (or None).

    Raises:
        BadName: a bad id or install name.
        NoSuchInstall: the install (or any install) does not exist.
        MutexBusy, StoreError: as ``install_mutex``; a filesystem fault.
    """
    root = runtime_root(home, runtime_id)
    if install is not None:
        check_install_name(install)
    guard_root(root)
    if not os.path.isdir(root):  # never installed: nothing to lock, and nothing written
        raise NoSuchInstall(f"{runtime_id} has no install {install} (installed: none)" if install is not None
                            else f"{runtime_id} is not installed", fix=install_it(runtime_id))
    with install_mutex(root, timeout=timeout, on_wait=on_wait), _changing(root, f"remove {runtime_id}"):
        clean_stale(root)
        present = [i.name for i in list_installs(root)]
        if install is not None and install not in present:
            raise NoSuchInstall(f"{runtime_id} has no install {install} (installed: {', '.join(present) or 'none'})",
                                fix=list_them(runtime_id))
        if install is None and not present:
            raise NoSuchInstall(f"{runtime_id} is not installed")
        names = [install] if install is not None else present
        chosen = remove_installs(root, names)
    return names, chosen


def remove_installs(root: str | os.PathLike[str], names: Collection[str]) -> str | None:
    """Delete the installs ``names`` of the runtime at ``root`` in the order that leaves a
    consistent home after every prefix of its steps: ``current`` and ``pinned`` stop naming them
    first (``current`` moves to the default of the installs that stay), then each is renamed away
    (gone for readers at once; a ``.removing-`` name the next writer deletes), then deleted. Call
    it holding the lock. Answers the default install left (or None).

    Raises:
        OSError: the directory cannot be changed.
    """
    chosen = refresh_current(root, leaving=names)
    doomed = [set_aside(root, name) for name in names]
    for path in doomed:
        remove_tree(path)
    return chosen
