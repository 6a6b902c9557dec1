"""An install's worker launcher (``bin/superfluid-worker-<id>``): its text, its writing, and whether a file is it.

See docs/cli.md, "What an install is".
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.layout import LIB, worker_module, worker_path

__all__ = ["launcher_argv", "launcher_script", "write_worker_launcher", "is_written_by_us"]

#: the most bytes of a launcher read to compare it (this superfluid's are about 4 KiB)
_MAX_BYTES = 64 << 10


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
    module = module or worker_module(runtime_id)
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
    boot = _boot(runtime_id, module or worker_module(runtime_id))
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


def is_written_by_us(path: str, runtime_id: str) -> bool:
    """Whether ``path`` is a regular file holding exactly the launcher this superfluid writes for
    ``runtime_id`` (``launcher_script``): a program that runs this superfluid's own worker, nothing
    an install's archive or anyone after it put there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = os.read(fd, _MAX_BYTES + 1)
    except OSError:
        return False
    finally:
        os.close(fd)
    try:
        return data == launcher_script(runtime_id).encode("utf-8")
    except ValueError:
        return False
