"""Where libbaseRT is found: the shared search, ``--basert-lib`` and ``BASERT_LIB``.

See docs/runtimes.md, "Where the library is found".
"""

from __future__ import annotations

from superfluid.runtime.hostfacts import locate as _locate
from superfluid.runtime.hostfacts.locate import Library, Located
from superfluid.runtime.kernel.lookup import Lookup

__all__ = ["Located", "FLAG", "ENV", "LIBRARY", "library_names", "namer", "locate"]

FLAG = "--basert-lib"
ENV = "BASERT_LIB"
LIBRARY = Library(stem="baseRT", runtime_id="basert", flag=FLAG, env=ENV,
                  missing="libbaseRT not found (looked in {dirs})")


def library_names(platform: str | None = None) -> tuple[str, str]:
    """The two file names searched in a directory, for ``platform`` (default: this one)."""
    return _locate.library_names(LIBRARY, platform)


def namer(flag: str | None, lookup: Lookup, *, spelled: str | None = None) -> str | None:
    """Who names the library: ``"--basert-lib"`` (or ``spelled``: ``"--lib"``), ``"BASERT_LIB"``, or
    None when it is searched for."""
    return _locate.namer(LIBRARY, flag, lookup, spelled=spelled)


def locate(flag: str | None, lookup: Lookup, *,
           executable: str | None = None, platform: str | None = None, spelled: str | None = None) -> Located:
    """libbaseRT: ``--basert-lib``, else ``BASERT_LIB``, else the search (see ``runtime.hostfacts.locate``).

    Raises:
        LibraryNotFound: a named path holds no library, or the search found none.
    """
    return _locate.locate(LIBRARY, flag, lookup, executable=executable, platform=platform, spelled=spelled)
