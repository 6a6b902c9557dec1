"""The layout of ``SUPERFLUID_HOME``, written once for the adapters, the installer and the face."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Mapping

from superfluid.runtime.kernel.errors import SuperfluidError

__all__ = [
    "worker_command",
    "worker_module",
    "shipped_dirs",
    "shipped_worker",
    "CURRENT",
    "PINNED",
    "LOCK",
    "LIB",
    "RECEIPT",
    "home",
    "runtimes_dir",
    "runtime_dir",
    "current_dir",
    "current_lib",
    "current_worker",
    "worker_path",
    "install_dir",
    "install_lib",
    "install_worker",
    "install_receipt",
    "install_env",
    "cache_dir",
    "cache_file",
    "keys_dir",
    "is_install_entry",
    "installs_in",
    "installed_installs",
    "has_install_of",
    "current_target",
    "HomeUnusable",
    "nearest_part",
    "home_fault",
    "writable_home",
    "linked_between",
]

#: in ``runtimes/<id>/``: the relative symlink to the default install
CURRENT = "current"
#: in ``runtimes/<id>/``: ``"<install>\n"`` when ``runtime use`` pinned one
PINNED = "pinned"
#: in ``runtimes/<id>/``: the ``flock`` that lets one process at a time change the runtime
LOCK = ".install.lock"
#: in an install: the engine's files
LIB = "lib"
#: in an install: its receipt (``runtime/kernel/receipt.py``)
RECEIPT = "runtime.json"

_PathLike = str | os.PathLike[str]


def home(environ: Mapping[str, str] | None = None) -> str:
    """``SUPERFLUID_HOME`` as an absolute path, default ``~/.superfluid`` (empty means unset)."""
    env = os.environ if environ is None else environ
    value = env.get("SUPERFLUID_HOME")
    if value:
        return os.path.abspath(value)
    user_home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(user_home if os.path.isabs(user_home) else "/", ".superfluid")


def runtimes_dir(home: _PathLike) -> str:
    """``<home>/runtimes``: one directory per runtime id."""
    return os.path.join(home, "runtimes")


def runtime_dir(home: _PathLike, runtime_id: str) -> str:
    """``<home>/runtimes/<id>``: the runtime's installs, ``current``, ``pinned`` and its lock."""
    return os.path.join(runtimes_dir(home), runtime_id)


def current_dir(home: _PathLike, runtime_id: str) -> str:
    """``<home>/runtimes/<id>/current``: the default install, through its symlink."""
    return os.path.join(runtime_dir(home, runtime_id), CURRENT)


def current_lib(home: _PathLike, runtime_id: str) -> str:
    """``<home>/runtimes/<id>/current/lib``: the engine files of the default install."""
    return os.path.join(current_dir(home, runtime_id), LIB)


def worker_command(runtime_id: str) -> str:
    """The worker's command name, ``superfluid-worker-<id>``."""
    return f"superfluid-worker-{runtime_id}"


def worker_module(runtime_id: str) -> str:
    """The module whose ``main`` the worker runs (its console script, an install's launcher, a fork of
    the face): ``superfluid.runtime.<id>.worker``, pyproject's ``[project.scripts]``."""
    return f"superfluid.runtime.{runtime_id}.worker"


def shipped_dirs() -> list[str]:
    """Directories that hold the workers shipped with this superfluid (beside the running program and
    its interpreter), real paths first."""
    dirs: list[str] = []
    for candidate in (sys.argv[0] if sys.argv and sys.argv[0] else "", sys.executable):
        if not candidate:
            continue
        real = os.path.dirname(os.path.realpath(candidate))
        if real not in dirs:
            dirs.append(real)
    return dirs


def shipped_worker(path: str, runtime_id: str) -> bool:
    """Whether ``path`` is, through any link, the worker of ``runtime_id`` beside this superfluid."""
    real = os.path.realpath(path)
    return any(real == os.path.realpath(os.path.join(d, worker_command(runtime_id))) for d in shipped_dirs())


def worker_path(runtime_id: str) -> str:
    """The worker program of an install, relative to it: ``bin/superfluid-worker-<id>``."""
    return f"bin/{worker_command(runtime_id)}"


def current_worker(home: _PathLike, runtime_id: str) -> str:
    """``<home>/runtimes/<id>/current/bin/superfluid-worker-<id>``: the default install's worker."""
    return os.path.join(current_dir(home, runtime_id), worker_path(runtime_id))


def install_dir(home: _PathLike, runtime_id: str, install: str) -> str:
    """``<home>/runtimes/<id>/<install>``: one install."""
    return os.path.join(runtime_dir(home, runtime_id), install)


def install_lib(install: _PathLike) -> str:
    """``<install>/lib``: an install's engine files."""
    return os.path.join(install, LIB)


def install_worker(install: _PathLike, runtime_id: str) -> str:
    """``<install>/bin/superfluid-worker-<id>``: an install's worker."""
    return os.path.join(install, worker_path(runtime_id))


def install_receipt(install: _PathLike) -> str:
    """``<install>/runtime.json``: an install's receipt."""
    return os.path.join(install, RECEIPT)


def install_env(install: _PathLike) -> str:
    """``<install>/env``: the Python environment an install carries (MLX's)."""
    return os.path.join(install, "env")


def cache_dir(home: _PathLike) -> str:
    """``<home>/cache``: downloads (content-addressed by sha256) and cached answers."""
    return os.path.join(home, "cache")


def cache_file(home: _PathLike, *parts: str) -> str:
    """``<home>/cache/<parts>``: a file of the home's cache (``answers.json``, ``validated/<stamp>``...)."""
    return os.path.join(cache_dir(home), *parts)


def keys_dir(home: _PathLike) -> str:
    """``<home>/keys``: the user's minisign public keys (``*.pub``) a compat document may be signed with."""
    return os.path.join(home, "keys")


def is_install_entry(name: str) -> bool:
    """Whether an entry of ``runtimes/<id>/`` may be an install: not ``current`` or ``pinned``, and
    not a dot name (the lock, and what writers leave while they work)."""
    return not name.startswith(".") and name not in (CURRENT, PINNED)


def installs_in(runtime_dir: _PathLike) -> list[str]:
    """The installs of ``runtimes/<id>/``, sorted: entries ``is_install_entry`` admits that are
    directories, not links (``current`` is the one link; another is no install). Empty when the
    directory is absent.

    Raises:
        OSError: the directory exists but cannot be listed.
    """
    try:
        names = os.listdir(runtime_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if is_install_entry(n) and _real_dir(os.path.join(runtime_dir, n)))


def installed_installs(runtime_id: str, home_dir: str) -> list[str]:
    """Names of the installs under ``<home_dir>/runtimes/<id>/`` that hold a receipt file
    (read or not: a broken install is still installed)."""
    root = runtime_dir(home_dir, runtime_id)
    try:
        names = installs_in(root)
    except OSError:
        return []
    return [n for n in names if os.path.isfile(install_receipt(os.path.join(root, n)))]


def has_install_of(installs: Iterable[str], version: str) -> bool:
    """Whether one of ``installs`` (install names, ``<version>-<backend>``: ``planning.install_name``)
    is of ``version``."""
    return any(n.startswith(f"{version}-") for n in installs)


def _real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def current_target(runtime_dir: _PathLike) -> tuple[str | None, str | None]:
    """What ``<runtime_dir>/current`` names: ``(install, None)`` when it is a symbolic link to an
    install directory of this runtime (relative, as we write it, or absolute into the same folder);
    ``(None, None)`` when there is no ``current``; else ``(None, why)``: dangling, a loop, a link out
    of the runtime's folder or to a non-install, a regular file, a directory. Nothing is followed
    out of the folder to decide.
    """
    root = os.fspath(runtime_dir)
    path = os.path.join(root, CURRENT)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{path} cannot be read ({e.strerror or e})"
    if not stat.S_ISLNK(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else (
            "a regular file" if stat.S_ISREG(st.st_mode) else "not a link")
        return None, f"{path} is {what}, not a link to an install"
    try:
        target = os.readlink(path)
    except OSError as e:
        return None, f"{path} cannot be read ({e.strerror or e})"
    name = target
    if "/" in target:
        full = os.path.normpath(os.path.join(root, target))
        inside = {os.path.normpath(os.path.abspath(root)), os.path.realpath(root)}
        if os.path.dirname(full) not in inside:
            return None, f"{path} points outside {root} (to {target})"
        name = os.path.basename(full)
    if name == CURRENT:
        return None, f"{path} is a link loop (it points at itself)"
    if not is_install_entry(name):
        return None, f"{path} points at {target}, which is not an install"
    install = os.path.join(root, name)
    if os.path.islink(install):
        return None, f"{path} points at {target}, a link, not an install"
    if not os.path.isdir(install):
        what = "does not exist" if not os.path.lexists(install) else "is not a directory"
        return None, f"{path} is dangling: {target} {what}"
    return name, None


class HomeUnusable(SuperfluidError):
    """``SUPERFLUID_HOME`` cannot hold installs: not a directory, not writable, or on a read-only
    file system. The message names the path."""


def nearest_part(path: _PathLike) -> str:
    """``path`` when something is there (a dangling link too), else the nearest folder above it that
    is: where it would be made."""
    probe = os.fspath(path)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    return probe


def home_fault(path: _PathLike) -> str | None:
    """Why nothing can be written under the home at ``path`` (None: it is, or can be made, a
    writable directory): it is a file, a dangling link, on a read-only file system, not writable,
    or cannot be made where it is. Touches nothing."""
    where = os.fspath(path)
    probe = nearest_part(where)
    if os.path.islink(probe) and not os.path.exists(probe):
        return f"SUPERFLUID_HOME ({where}): {probe} is a dangling link"
    if not os.path.isdir(probe):
        what = "is a file, not a directory" if os.path.isfile(probe) else "is not a directory"
        return f"SUPERFLUID_HOME ({where}) {what}" if probe == where else \
            f"SUPERFLUID_HOME ({where}) cannot be made: {probe} {what}"
    made = "" if probe == where else f" cannot be made: {probe}"
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        read_only = False
    if read_only:
        return f"SUPERFLUID_HOME ({where}){made or ''} is on a read-only file system"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"SUPERFLUID_HOME ({where}){made} is not writable" if made else \
            f"SUPERFLUID_HOME ({where}) is not writable by this user"
    return None


def writable_home(where: str) -> str:
    """The home ``where`` (``home(environ)``, read at the face), checked to be (or to be able to become)
    a writable directory.

    Raises:
        HomeUnusable: it is not (names the path and why).
    """
    fault = home_fault(where)
    if fault is not None:
        raise HomeUnusable(fault,
                           advice="point SUPERFLUID_HOME at a writable directory (or unset it for ~/.superfluid)")
    return where


def linked_between(home: _PathLike, path: _PathLike) -> str | None:
    """The first part of ``path`` below ``home`` that is a symbolic link (``path`` itself included),
    or None: a writer of the home's caches writes nothing through such a link, out of the home."""
    top = os.path.abspath(os.fspath(home))
    here = os.path.abspath(os.fspath(path))
    rel = os.path.relpath(here, top)
    if rel == os.curdir or rel.startswith(os.pardir):
        return None
    current = top
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            return current
    return None
