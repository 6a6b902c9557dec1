"""Where libllama is: the one named, else the first of the usual places that holds it.

Order (notes/superfluid-contract.md §4.2):

1. a library named by ``--llamacpp-lib`` (``--lib`` to the worker), else ``SUPERFLUID_LLAMA_LIB``
   (empty means unset): a file is taken as is, a directory must hold ``libllama``;
2. otherwise the first of these directories that holds it: the worker executable's directory, its
   ``../lib``, and ``$SUPERFLUID_HOME/runtimes/llamacpp/current/lib``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from superfluid.runtime.errors import LibraryNotFound

__all__ = ["Located", "ENV", "library_names", "search_dirs", "locate"]

ENV = "SUPERFLUID_LLAMA_LIB"
_FIX = "install it with `superfluid runtime install llamacpp`, or name a build with --llamacpp-lib or " + ENV


@dataclass(frozen=True)
class Located:
    """A libllama path and who named it (``None`` when found by searching)."""

    path: str
    named: str | None = None  # "--llamacpp-lib" | "SUPERFLUID_LLAMA_LIB" | None


def library_names(os_name: str | None = None) -> tuple[str, ...]:
    """The file names libllama goes by on this OS, preferred first."""
    os_name = os_name or ("macos" if sys.platform == "darwin" else "linux")
    if os_name == "macos":
        return ("libllama.dylib", "libllama.0.dylib")
    return ("libllama.so", "libllama.so.0")


def search_dirs(worker_dir: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The directories searched when no library is named, in order."""
    from superfluid.runtime.host import home

    exe_dir = worker_dir or os.path.dirname(os.path.abspath(sys.argv[0] or "."))
    return [
        exe_dir,
        os.path.normpath(os.path.join(exe_dir, "..", "lib")),
        os.path.join(home(environ), "runtimes", "llamacpp", "current", "lib"),
    ]


def _in_dir(directory: str) -> str | None:
    for name in library_names():
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def locate(named: str | None = None, *, environ: Mapping[str, str] | None = None,
           worker_dir: str | None = None) -> Located:
    """Find libllama.

    Args:
        named: the value of ``--llamacpp-lib``, if given.
        environ: the environment (default ``os.environ``), for ``SUPERFLUID_LLAMA_LIB`` and the home.
        worker_dir: the worker executable's directory (default: that of ``sys.argv[0]``).

    Raises:
        LibraryNotFound: a named file or directory holds no libllama, or no searched place does.
    """
    env = os.environ if environ is None else environ
    source = "--llamacpp-lib" if named else ENV
    value = named or env.get(ENV) or None
    if value:
        if os.path.isdir(value):
            found = _in_dir(value)
            if found is None:
                raise LibraryNotFound(f"{value} (named by {source}) holds no {library_names()[0]}",
                                      looked=[value], fix=_FIX)
            return Located(os.path.abspath(found), source)
        if not os.path.exists(value):
            raise LibraryNotFound(f"{value} (named by {source}) does not exist", looked=[value], fix=_FIX)
        return Located(os.path.abspath(value), source)
    dirs = search_dirs(worker_dir, env)
    for directory in dirs:
        found = _in_dir(directory)
        if found:
            return Located(os.path.abspath(found))
    raise LibraryNotFound(
        f"llama.cpp not found (looked for {library_names()[0]} in {', '.join(dirs)})", looked=dirs, fix=_FIX
    )
