"""Where libbaseRT is found: a named path, else a fixed search (SPEC §4.1, notes/basert.md §5).

Order, first match wins:

1. ``--basert-lib P`` (the worker's flag), then 2. ``BASERT_LIB`` (ignored when empty). A named
   directory is searched under the library's two file names and nowhere else; a named file is used
   as named (if it does not exist, that is the answer: not found, naming it).
3. A search: the executable's directory (``sys.argv[0]``, symlinks resolved), its ``../lib``, then
   ``$SUPERFLUID_HOME/runtimes/basert/current/lib``. The first file that exists wins.

File names in a directory: ``libbaseRT.so`` then ``libbaseRT.so.0``; on macOS ``libbaseRT.dylib``
then ``libbaseRT.0.dylib``. Pure path logic: nothing is loaded here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from superfluid.runtime.errors import LibraryNotFound
from superfluid.runtime.host import home

__all__ = ["Located", "FIX", "FLAG", "ENV", "library_names", "search_dirs", "namer", "locate"]

FLAG = "--basert-lib"
ENV = "BASERT_LIB"
FIX = "install it with `superfluid runtime install basert`, or name one with --basert-lib or BASERT_LIB"


@dataclass(frozen=True)
class Located:
    """A library path to load, how it was chosen (``named``: the flag, the variable, or None when
    searched) and the places looked at."""

    path: str
    named: str | None
    looked: tuple[str, ...]


def library_names(platform: str | None = None) -> tuple[str, str]:
    """The two file names searched in a directory, for ``platform`` (default: this one)."""
    if (platform or sys.platform) == "darwin":
        return ("libbaseRT.dylib", "libbaseRT.0.dylib")
    return ("libbaseRT.so", "libbaseRT.so.0")


def namer(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """Who names the library: ``"--basert-lib"``, ``"BASERT_LIB"``, or None when it is searched for."""
    if flag:
        return FLAG
    return ENV if environ.get(ENV) else None


def search_dirs(executable: str | None, environ: Mapping[str, str]) -> list[str]:
    """The searched directories, in order: beside the executable, its ``../lib``, the current install."""
    dirs: list[str] = []
    exe = sys.argv[0] if executable is None and sys.argv and sys.argv[0] else executable
    if exe:
        beside = os.path.dirname(os.path.realpath(exe))
        dirs += [beside, os.path.normpath(os.path.join(beside, "..", "lib"))]
    dirs.append(os.path.join(home(environ), "runtimes", "basert", "current", "lib"))
    return dirs


def _in_dir(directory: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _named(path: str, namer: str, names: tuple[str, ...]) -> Located:
    if os.path.isdir(path):
        found = _in_dir(path, names)
        looked = tuple(os.path.join(path, n) for n in names)
        if found is None:
            raise LibraryNotFound(
                f"{namer} names the directory {path}, which holds neither {' nor '.join(names)}",
                looked=list(looked), fix=FIX)
        return Located(os.path.abspath(found), namer, looked)
    if not os.path.exists(path):
        raise LibraryNotFound(f"{namer} names {path}, which does not exist", looked=[path], fix=FIX)
    return Located(os.path.abspath(path), namer, (path,))


def locate(flag: str | None = None, environ: Mapping[str, str] | None = None, *,
           executable: str | None = None, platform: str | None = None) -> Located:
    """The library to load: ``flag`` (``--basert-lib``), else ``BASERT_LIB``, else the search.

    Args:
        flag: the value of ``--basert-lib``, if given (empty counts as not given).
        environ: the environment to read ``BASERT_LIB`` and ``SUPERFLUID_HOME`` from (default: ours).
        executable: the path whose directory is searched first (default: ``sys.argv[0]``).
        platform: ``sys.platform`` value choosing the file names (default: this one).

    Raises:
        LibraryNotFound: a named path holds no library, or the search found none (lists where it
            looked and the command that installs one).
    """
    env = os.environ if environ is None else environ
    names = library_names(platform)
    if flag:
        return _named(flag, FLAG, names)
    if env.get(ENV):
        return _named(env[ENV], ENV, names)
    looked: list[str] = []
    dirs = search_dirs(executable, env)
    for directory in dirs:
        looked += [os.path.join(directory, n) for n in names]
        found = _in_dir(directory, names)
        if found is not None:
            return Located(os.path.abspath(found), None, tuple(looked))
    raise LibraryNotFound(f"libbaseRT not found (looked in {', '.join(dirs)})", looked=looked, fix=FIX)
