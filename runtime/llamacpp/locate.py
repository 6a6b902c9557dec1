"""Where libllama is found: the shared search, ``--llamacpp-lib`` and ``SUPERFLUID_LLAMA_LIB``.

See docs/runtimes.md, "How the library is found".
"""

from __future__ import annotations

from superfluid.runtime.hostfacts import locate as _locate
from superfluid.runtime.hostfacts.locate import Library, Located
from superfluid.runtime.kernel.lookup import Lookup

__all__ = ["Located", "FLAG", "ENV", "LIBRARY", "library_names", "locate"]

FLAG = "--llamacpp-lib"
ENV = "SUPERFLUID_LLAMA_LIB"
LIBRARY = Library(
    stem="llama", runtime_id="llamacpp", flag=FLAG, env=ENV,
    missing="llama.cpp not found (looked for {name} in {dirs})",
)


def library_names(platform: str | None = None) -> tuple[str, str]:
    """The file names libllama goes by, preferred first, for ``platform`` (default: this one)."""
    return _locate.library_names(LIBRARY, platform)


def locate(named: str | None, lookup: Lookup, *,
           executable: str | None = None, platform: str | None = None, spelled: str | None = None) -> Located:
    """libllama: ``--llamacpp-lib``, else ``SUPERFLUID_LLAMA_LIB``, else the search (see ``runtime.hostfacts.locate``).

    Raises:
        LibraryNotFound: a named file or directory holds no libllama, or no searched place does.
    """
    return _locate.locate(LIBRARY, named, lookup, executable=executable, platform=platform, spelled=spelled)
