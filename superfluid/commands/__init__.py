"""The commands of ``superfluid``, one module each: its flags, its help page and its ``run``.

A command is added with its module here and one line in ``COMMANDS`` (see ``superfluid.parser``).
"""

from __future__ import annotations

__all__ = ["COMMANDS"]

#: every command the face runs, by the words that name it, in the order ``--help`` lists them -> its module
#: in this package (the words before the last name the group it is listed under: ``runtime``, ``mirror``...)
COMMANDS: dict[str, str] = {
    "version": "version",
    "runtimes": "runtimes",
    "compat": "compat",
    "runtime install": "install",
    "runtime versions": "versions",
    "runtime options": "options",
    "runtime check": "check",
    "runtime update": "update",
    "runtime repair": "repair",
    "runtime remove": "remove",
    "runtime list": "installs",
    "runtime use": "use",
    "lock": "lock",
    "mirror sync": "mirror_sync",
    "mirror verify": "mirror_verify",
    "mirror push": "mirror_push",
    "runtime verify": "verify",
    "attestation verify": "attestation_verify",
    "runtime gc": "gc",
    "cache dir": "cache_dir",
    "cache du": "cache_du",
    "cache prune": "cache_prune",
    "serve": "serve",
    "completion": "completion",
    "doctor": "doctor",
}
