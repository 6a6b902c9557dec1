"""The command lines asked on every run, parsed without building the command tree, each with the module
that answers it (docs/cli.md): ``runtime versions <id> [--json]`` is answered by ``superfluid.declarations``
from what the runtime declares, without the ``--for`` and release-listing machinery of its command's module."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from superfluid.runtime.registry import canonical

if TYPE_CHECKING:
    import argparse

__all__ = ["Quick", "parse"]

#: the top level's flags, as the tree leaves them when the line does not give them
_TOP: dict[str, Any] = {"help": False, "version": False}
#: ``runtime versions``' flags left unset (``--for`` and its trust flags, ``--mirror``, ``--offline``)
_VERSIONS_UNSET: dict[str, Any] = {"for_": None, "key": None, "require_signature": False, "trust_root": None,
                                   "insecure_no_freshness": False, "mirror": None, "offline": False}
#: the variables that make ``runtime versions`` read more than the recipe (``--for``, a release listing)
_VERSIONS_READ_MORE = ("SUPERFLUID_FOR", "SUPERFLUID_MIRROR")


class Quick(NamedTuple):
    """A line parsed here: the namespace the tree would give it, and the module whose ``run`` answers it."""

    args: argparse.Namespace
    module: str


def _one_runtime(sub: str, rest: Sequence[str]) -> dict[str, Any] | None:
    """``runtime versions|options`` with one id (not a flag) and at most ``--json``, in either order."""
    json = "--json" in rest
    ids = [a for a in rest if a != "--json"]
    if len(rest) > 2 or len(ids) != 1 or ids[0].startswith("-"):
        return None
    values: dict[str, Any] = {**_TOP, "command": "runtime", "sub": sub, "id": canonical(ids[0]), "json": json}
    return {**values, **_VERSIONS_UNSET} if sub == "versions" else values


def parse(args_in: Sequence[str], environ: Mapping[str, str]) -> Quick | None:
    """The namespace of ``superfluid <args_in>`` and the module that answers it, when it is one of the
    lines this module knows (``runtime versions <id> [--json]`` while neither ``SUPERFLUID_FOR`` nor
    ``SUPERFLUID_MIRROR`` asks for more: asked by hosts and scripts before anything else), else None,
    for the tree to parse. The namespace is the one the tree makes (a test holds the two equal, line by
    line), as a ``SimpleNamespace``: what commands read of a namespace (its attributes)."""
    line = tuple(args_in)
    if line[:2] != ("runtime", "versions") or any(environ.get(name) for name in _VERSIONS_READ_MORE):
        return None
    values = _one_runtime(line[1], line[2:])
    if values is None:
        return None
    return Quick(cast("argparse.Namespace", SimpleNamespace(**values)), "superfluid.declarations")
