"""Where an engine library is found: the one named, else the first searched directory holding it.

See docs/runtimes.md, "Where the library is found".
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from superfluid.runtime.kernel import layout
from superfluid.runtime.kernel.errors import LibraryNotFound
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.lookup import Lookup

__all__ = ["Library", "Located", "library_names", "namer", "beside", "search_dirs", "locate"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Library:
    """What an adapter says about its engine library; the search itself is the same for all."""

    stem: str  # "baseRT": libbaseRT.so, libbaseRT.so.0; libbaseRT.dylib, libbaseRT.0.dylib on macOS
    runtime_id: str  # whose current install is searched
    flag: str  # "--basert-lib"
    env: str  # "BASERT_LIB"
    missing: str  # nothing found: a format of {name} (the first file name) and {dirs}

    @property
    def advice(self) -> str:
        """How to name a library (not a command): its flag or its variable."""
        return f"name one with {self.flag} or {self.env}"

    def installs(self) -> Fix:
        """The fix of a library not found: install the runtime."""
        return Fix.superfluid("runtime", "install", self.runtime_id, does="installs it")


@dataclass(frozen=True, slots=True)
class Located:
    """A library path to load, who named it (the flag, the variable, or None when searched) and the
    files looked at."""

    path: str
    named: str | None
    looked: tuple[str, ...]


def library_names(library: Library, platform: str | None = None) -> tuple[str, str]:
    """The two file names searched in a directory, preferred first, for ``platform`` (a
    ``sys.platform`` value; default this one)."""
    if (platform or sys.platform) == "darwin":
        return (f"lib{library.stem}.dylib", f"lib{library.stem}.0.dylib")
    return (f"lib{library.stem}.so", f"lib{library.stem}.so.0")


def namer(library: Library, flag: str | None, lookup: Lookup, *, spelled: str | None = None) -> str | None:
    """Who names the library: its flag (as ``spelled`` when the user gave another spelling of it,
    e.g. ``--lib``), its variable (in ``lookup``), or None when it is searched for."""
    if flag:
        return spelled or library.flag
    return library.env if lookup.variable(library.env) else None


def beside(folder: str) -> list[str]:
    """The folders searched beside an executable in ``folder``: ``folder`` and its ``../lib``."""
    return [folder, os.path.normpath(os.path.join(folder, "..", layout.LIB))]


def search_dirs(library: Library, home: str, executable: str | None = None) -> list[str]:
    """The searched directories, in order: beside the executable (default ``sys.argv[0]``; none
    when it is empty), its ``../lib``, the current install's ``lib`` in ``home`` (``SUPERFLUID_HOME``)."""
    dirs: list[str] = []
    exe = executable if executable is not None else (sys.argv[0] if sys.argv else "")
    if exe:
        # realpath: a worker reached through a link (a shim, ``current/bin/…``) searches beside the
        # file it really is, so its ``../lib`` is its own install's and not the link's neighbour's
        dirs += beside(os.path.dirname(os.path.realpath(exe)))
    # through `current` only when it is absent or a good link to an install of this runtime: a bad
    # one (dangling, a loop, out of the home) is never followed
    if layout.current_target(layout.runtime_dir(home, library.runtime_id))[1] is None:
        dirs.append(layout.current_lib(home, library.runtime_id))
    return dirs


def _in_dir(directory: str, names: tuple[str, ...]) -> str | None:
    for name in names:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _named(library: Library, path: str, by: str, names: tuple[str, ...]) -> Located:
    # abspath, not realpath, for the library itself: it is reported as it was reached
    # (``current/lib/…`` stays ``current``), and dlopen follows the links anyway
    if os.path.isdir(path):
        looked = tuple(os.path.join(path, n) for n in names)
        found = _in_dir(path, names)
        if found is None:
            raise LibraryNotFound(f"{by} names the directory {path}, which holds neither {' nor '.join(names)}",
                                  looked=list(looked), fix=library.installs(), advice=library.advice)
        return Located(os.path.abspath(found), by, looked)
    if not os.path.exists(path):
        raise LibraryNotFound(f"{by} names {path}, which does not exist", looked=[path], fix=library.installs(),
                              advice=library.advice)
    return Located(os.path.abspath(path), by, (path,))


def locate(library: Library, flag: str | None, lookup: Lookup, *,
           executable: str | None = None, platform: str | None = None, spelled: str | None = None) -> Located:
    """The library to load: ``flag``, else the library's variable, else the search.

    Args:
        library: the adapter's names, flag, variable and words.
        flag: the flag's value, if given (empty counts as not given).
        lookup: the environment as read at the face: the library's variable and ``SUPERFLUID_HOME``.
        executable: the path whose directory is searched first (default: ``sys.argv[0]``).
        platform: ``sys.platform`` value choosing the file names (default: this one).
        spelled: how the flag was given when not as ``library.flag`` (``--lib``): messages and
            ``Located.named`` say what the user typed.

    Raises:
        LibraryNotFound: a named path holds no library, or the search found none (lists where it
            looked and how to install or name one).
    """
    names = library_names(library, platform)
    by = namer(library, flag, lookup, spelled=spelled)
    if by is not None:
        return _named(library, flag or lookup.variables[library.env], by, names)
    looked: list[str] = []
    dirs = search_dirs(library, lookup.home, executable)
    for directory in dirs:
        looked += [os.path.join(directory, n) for n in names]
        found = _in_dir(directory, names)
        if found is not None:
            return Located(os.path.abspath(found), None, tuple(looked))
    raise LibraryNotFound(library.missing.format(name=names[0], dirs=", ".join(dirs)), looked=looked,
                          fix=library.installs(), advice=library.advice)
