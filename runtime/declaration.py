"""What a worker declares without its engine: ``compat``, ``versions`` and ``options`` (``--json``).

See docs/cli.md, "Workers: `superfluid-worker-<id> <command>`".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import installed_installs
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import options_json

if TYPE_CHECKING:
    from superfluid.runtime.adapter import Adapter

# The worker's dispatch (runtime/worker.py) imports this module for these commands only, as it
# imports a command's module: a check, the install's probe, never loads the host's probes or the
# list of installs.

__all__ = ["declaration"]


def declaration(adapter: Adapter, command: str, rest: list[str], lookup: Lookup) -> object:
    """The document ``command`` (``compat``, ``versions`` or ``options``) declares for ``adapter``: its compat part, the
    versions it installs judged for this host (``lookup``: the worker's environment as read), or the
    options it takes.

    Raises:
        UsageError: anything but ``--json`` after the command.
    """
    if rest != ["--json"]:
        raise UsageError(f"{command} takes exactly --json (got {' '.join(rest) or 'nothing'})")
    if command == "compat":
        return adapter.compat()
    if command == "versions":
        return adapter.versions(detect(lookup.host), installed_installs(adapter.id, lookup.home))
    return options_json(adapter.options())
