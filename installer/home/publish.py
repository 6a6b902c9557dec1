"""Where an install lands: staged beside the installs, probed, then published by one rename.

See docs/install.md, "The sequence".
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from superfluid.installer.files import remove_tree
from superfluid.installer.home.installs import check_install_name, current_install, read_pinned, runtime_root
from superfluid.installer.home.store import StoreError, clean_stale, guard_root, make_staging, publish, refresh_current
from superfluid.installer.mutex import MutexOwner, install_mutex
from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.layout import CURRENT, LIB, worker_path
from superfluid.runtime.kernel.receipt import RECEIPT, Receipt, now_utc, write_receipt
from superfluid.runtime.kernel.record import with_files

__all__ = ["Published", "install_staged", "launcher_argv", "write_worker_launcher", "launcher_script"]


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


def launcher_argv(runtime_id: str, *, python: str | None = None, module: str | None = None) -> list[str]:
    """The command a launcher written with ``argv`` execs: this interpreter running the adapter's
    worker ``main``.

    Why not the console script ``superfluid-worker-<id>``: the adapter's library search starts at
    ``sys.argv[0]`` (``../lib`` beside the worker), and a console script would put its own path
    there, not the install's. Running ``main`` from a ``-c`` bootstrap lets the launcher hand over
    its own path as ``argv[0]`` (the real path of ``<install>/bin/…``, even through ``current``).
    ``-P`` (3.11+) or ``-I`` keeps the working directory off ``sys.path``, so a ``superfluid/``
    directory where the daemon runs cannot replace our modules. This names one interpreter for
    good; an install's own launcher finds its Python each time it runs (``launcher_script``).
    """
    flag = "-P" if sys.version_info >= (3, 11) else "-I"
    module = module or f"superfluid.runtime.{runtime_id}.worker"
    boot = f"import sys; sys.argv[0] = sys.argv.pop(1); from {module} import main; sys.exit(main())"
    return [python or sys.executable, flag, "-c", boot]


def _layout(runtime_id: str) -> tuple[str, int]:
    """The launcher's file name, and how many folders its install is above the folder holding it
    (``worker_path``: ``bin/<name>``, one)."""
    *folders, name = worker_path(runtime_id).split("/")
    return name, len(folders)


def _engine_note(runtime_id: str) -> str:
    """Where the engine is, seen from the launcher: ``../lib``."""
    return "../" * _layout(runtime_id)[1] + LIB


def _boot(runtime_id: str, module: str) -> str:
    """The Python half of the launcher, run as a script (the launcher itself): the adapter's worker
    ``main`` with the launcher as ``argv[0]``, named as its command in ``ps`` (the kernel's ``comm``,
    as a console script's), or, when this Python has no superfluid, one line saying which command
    restores it."""
    name, up = _layout(runtime_id)
    install = "sys.argv[0]"
    for _ in range(up + 1):
        install = f"os.path.dirname({install})"
    return "\n".join([
        "import os, sys",
        "if sys.path and sys.path[0] in ('', '.', os.path.dirname(os.path.abspath(sys.argv[0]))):",
        "    del sys.path[0]  # the working directory or this folder: never a source of our modules (as -P)",
        "try:  # ps names it as it names a console script, `superfluid-worker-<id> serve ...`: its comm too",
        "    with open('/proc/self/comm', 'w') as comm:",
        "        comm.write(os.path.basename(sys.argv[0])[:15])",
        "except OSError:",
        "    pass",
        "try:",
        f"    from {module} import main",
        "except ImportError as e:",
        f"    install = os.path.basename({install})",
        f"    sys.stderr.write(f'{name}: {{sys.executable}} has no superfluid to run this install ({{e}}); '",
        f"                     f'`superfluid runtime repair {runtime_id} {{install}}` rewrites its launcher'",
        "                     + chr(10))",
        "    sys.exit(127)",
        "sys.exit(main())",
    ])


#: what opens the sh half as a Python string (and is the null command ``:`` to sh), and closes it
_OPEN, _CLOSE = "'" * 3 + ":'", "'" * 3


def launcher_script(runtime_id: str, *, made_by: str | None = None, module: str | None = None) -> str:
    """The launcher of an install: a POSIX sh script that is also the Python program it runs. The sh
    half finds a Python and runs this very file under it with the arguments (so ``ps`` shows
    ``python …/bin/superfluid-worker-<id> serve …``, as a console script, not a ``-c`` program); the
    Python half runs the adapter's worker with the launcher's own path as ``argv[0]`` (its ``../lib``
    holds the engine). The Python is the first that is there, in order:

    1. ``$SUPERFLUID_PYTHON``: the superfluid that starts a worker names its own Python;
    2. the Python of the ``superfluid`` on ``PATH``, found as the catalog finds workers (symlinks
       resolved, so a package manager's ``bin/`` link or a shim leads to the real one): its
       ``#!`` interpreter, else the ``python3`` beside it;
    3. ``made_by``, the Python that made the install (default: this one), while it still exists.

    No path is needed but the last, so moving or deleting the environment that made the install
    breaks nothing while a superfluid is on ``PATH`` (or asks); with none anywhere, the launcher
    exits 127 naming the command that restores it (``superfluid runtime repair <id> <install>``).

    Raises:
        ValueError: ``made_by`` cannot be written into the sh half, which is a Python string too (three
            single quotes in a row, or a backslash).
    """
    name, up = _layout(runtime_id)
    engine = _engine_note(runtime_id)
    install_dir = '"$here"'
    for _ in range(up):
        install_dir = f'"$(dirname -- {install_dir})"'
    boot = _boot(runtime_id, module or f"superfluid.runtime.{runtime_id}.worker")
    made = made_by or sys.executable
    # one line (a worker's reason is its last line of stderr), naming the command that restores it; its
    # backticks are quoted singly: a backslash in the sh half would be an escape of the Python string
    tick = "\"'`'\""
    missing = (f"{name}: no superfluid to run this install's worker: SUPERFLUID_PYTHON is not set, no "
               "superfluid is on PATH, and $made_by (the Python that made this install) is gone; install "
               f"superfluid (or put it on PATH), then {tick}superfluid runtime repair {runtime_id} $install{tick} "
               "rewrites this launcher")
    shell = f"""#!/bin/sh
{_OPEN}
# {name}: written by superfluid's installer. This file is a POSIX sh script and the Python program
# it runs: the sh half runs this file under the first Python found, $SUPERFLUID_PYTHON (set by the
# superfluid that starts it), the Python of the `superfluid` on PATH, or the one that made this
# install; the Python half runs the {runtime_id} adapter's worker with this file as argv[0] (its
# {engine} holds the engine). Moving or deleting that environment breaks nothing while a superfluid
# is on PATH.
here=$(cd -- "$(dirname -- "$0")" && pwd -P) || exit 127
made_by={shlex.quote(made)}
py=${{SUPERFLUID_PYTHON:-}}
if [ -n "$py" ] && [ ! -x "$py" ]; then py=; fi
if [ -z "$py" ]; then
  sf=$(command -v superfluid 2>/dev/null) || sf=
  case $sf in /*) ;; *) sf= ;; esac
  hops=0
  while [ -n "$sf" ] && [ -L "$sf" ] && [ "$hops" -lt 40 ]; do
    link=$(readlink -- "$sf") || break
    case $link in /*) sf=$link ;; *) sf=$(dirname -- "$sf")/$link ;; esac
    hops=$((hops + 1))
  done
  if [ -n "$sf" ] && [ -f "$sf" ]; then
    first=
    IFS= read -r first < "$sf" || true
    case $first in
      '#!/'*) first=${{first#??}}; first=${{first%% *}}
        case ${{first##*/}} in python*) if [ -x "$first" ]; then py=$first; fi ;; esac ;;
    esac
    for candidate in "$(dirname -- "$sf")/python3" "$(dirname -- "$sf")/python"; do
      if [ -z "$py" ] && [ -x "$candidate" ]; then py=$candidate; fi
    done
  fi
fi
if [ -z "$py" ] && [ -x "$made_by" ]; then py=$made_by; fi
if [ -z "$py" ]; then
  install=$(basename -- {install_dir})
  echo "{missing}" >&2
  exit 127
fi
exec "$py" "$here/{name}" "$@"
"""
    if _CLOSE in shell.split(_OPEN, 1)[1] or "\\" in shell:
        raise ValueError(f"{made!r} cannot be written into an install's launcher")
    return f"{shell}{_CLOSE}\n{boot}\n"


def write_worker_launcher(install_dir: str | os.PathLike[str], runtime_id: str, *,
                          argv: Sequence[str] | None = None) -> Path:
    """Write ``<install_dir>/bin/superfluid-worker-<id>``: a POSIX sh script, by default
    ``launcher_script(id)`` (it finds a Python with superfluid each time it runs); with ``argv``,
    one that execs exactly ``argv`` with the launcher's own path and its arguments.

    Raises:
        OSError: it cannot be written.
    """
    path = Path(install_dir) / worker_path(runtime_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if argv is None:
        script = launcher_script(runtime_id)
    else:
        script = (
            "#!/bin/sh\n"
            f"# {path.name}: written by superfluid's installer; runs the adapter's worker\n"
            f"# with this file as argv[0] (its {_engine_note(runtime_id)} holds the engine).\n"
            'here=$(cd -- "$(dirname -- "$0")" && pwd -P) || exit 127\n'
            f'exec {" ".join(shlex.quote(a) for a in argv)} "$here/{path.name}" "$@"\n'
        )
    write_atomic(path, script.encode("utf-8"), mode=0o755)
    return path


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
