"""What a runtime's check, serve and library search read of the environment, read once at a process's face."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from superfluid.runtime.kernel.layout import home

__all__ = ["Lookup", "HOST_PREFIX", "PRIMED_VARIABLE", "LOAD_FIRST", "GO", "is_host_variable", "read"]

#: the variables that override a host fact (``runtime.hostfacts.host.detect``); ``LD_LIBRARY_PATH`` too
HOST_PREFIX = "SUPERFLUID_HOST_"
#: set (``1``) for a worker started primed (``runtime.process.start_worker``, ``superfluid.serve_ahead``): it
#: makes ready (imports what its command needs), then waits on its stdin for the word to go on
PRIMED_VARIABLE = "SUPERFLUID_PRIMED"
#: its value for a serve worker that loads its engine first and waits for the word before it binds (the
#: files it loads unchanged since the last start its face served: ``superfluid.serve_ahead``)
LOAD_FIRST = "load"
#: the line a face writes to a serve worker it started primed, once it has chosen that very worker
GO = b"go\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup:
    """The environment as a worker's main (or the face, for a check in process) read it, once: the
    layers below take this record, never ``environ`` (docs/architecture.md, "The environment")."""

    #: ``SUPERFLUID_HOME``, absolute (``layout.home``): whose ``runtimes/<id>/current`` is searched
    home: str
    #: the host-fact overrides, ``SUPERFLUID_HOST_*`` and ``LD_LIBRARY_PATH``: what ``hostfacts.host.detect``
    #: and ``hostfacts.system`` are given
    host: Mapping[str, str]
    #: every variable as read: an engine's own ones (``BASERT_LIB``, ``SUPERFLUID_MLX_VENV``), asked by
    #: ``variable``, and the environment a program the engine starts inherits (the MLX probe)
    variables: Mapping[str, str]

    def variable(self, name: str) -> str | None:
        """The value of the variable ``name``; None when it is unset or empty (empty means unset)."""
        return self.variables.get(name) or None


def is_host_variable(name: str) -> bool:
    """Whether the variable ``name`` is a host fact's: an override ``SUPERFLUID_HOST_*``, or
    ``LD_LIBRARY_PATH`` (the loader searches it first)."""
    return name.startswith(HOST_PREFIX) or name == "LD_LIBRARY_PATH"


def read(environ: Mapping[str, str]) -> Lookup:
    """The record of ``environ``, a process's environment read at its face (a copy: a later change
    to ``environ`` changes nothing)."""
    copy = dict(environ)
    host = {k: v for k, v in copy.items() if is_host_variable(k)}
    return Lookup(home=home(copy), host=MappingProxyType(host), variables=MappingProxyType(copy))
