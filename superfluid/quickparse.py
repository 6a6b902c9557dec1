"""The command lines asked on every run, parsed without building the command tree (docs/cli.md)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import argparse

__all__ = ["parse", "LINES"]

#: the top level's flags, as the tree leaves them when the line does not give them
_TOP: dict[str, Any] = {"help": False, "version": False}
#: ``runtime versions``' flags left unset (``--for`` and its trust flags, ``--mirror``, ``--offline``)
_VERSIONS_UNSET: dict[str, Any] = {"for_": None, "key": None, "require_signature": False, "trust_root": None,
                                   "insecure_no_freshness": False, "mirror": None, "offline": False}
#: example lines of every form ``parse`` answers (the test parses each with the tree too)
LINES: tuple[tuple[str, ...], ...] = (
    ("--version",), ("-V",), ("version",), ("version", "--json"), ("runtimes",), ("runtimes", "--json"),
    ("runtime", "versions", "basert"), ("runtime", "versions", "llamacpp", "--json"),
    ("runtime", "versions", "--json", "mlx"), ("runtime", "options", "llamacpp", "--json"),
    ("runtime", "options", "basert"), ("runtime", "versions", "nosuch", "--json"),
    ("runtime", "versions", "llama.cpp", "--json"),
)


def _one_runtime(sub: str, rest: Sequence[str]) -> dict[str, Any] | None:
    """``runtime versions|options`` with one id (not a flag) and at most ``--json``, in either order."""
    json = "--json" in rest
    ids = [a for a in rest if a != "--json"]
    if len(rest) > 2 or len(ids) != 1 or ids[0].startswith("-"):
        return None
    from superfluid.runtime.registry import canonical  # llama.cpp is llamacpp, as parser.canonical_ids says

    values: dict[str, Any] = {**_TOP, "command": "runtime", "sub": sub, "id": canonical(ids[0]), "json": json}
    return {**values, **_VERSIONS_UNSET} if sub == "versions" else values


def parse(args_in: Sequence[str]) -> argparse.Namespace | None:
    """The namespace of ``superfluid <args_in>`` when it is one of the lines this module knows
    (``runtimes [--json]``, ``runtime versions|options <id> [--json]``, ``--version``: asked by
    hosts and scripts before anything else, where building the argparse tree costs more than the
    answer), else None, for the tree to parse. The namespace is the one the tree makes (a test holds
    the two equal, line by line), as a ``SimpleNamespace``: what commands read of a namespace (its
    attributes), without importing argparse."""
    line = tuple(args_in)
    values: dict[str, Any] | None = None
    if line in (("--version",), ("-V",)):
        values = {**_TOP, "version": True, "command": None}
    elif line in (("version",), ("version", "--json")):
        values = {**_TOP, "command": "version", "json": len(line) == 2}
    elif line in (("runtimes",), ("runtimes", "--json")):
        values = {**_TOP, "command": "runtimes", "json": len(line) == 2, "verify": False}
    elif line[:1] == ("runtime",) and line[1:2] in (("versions",), ("options",)):
        values = _one_runtime(line[1], line[2:])
    return None if values is None else cast("argparse.Namespace", SimpleNamespace(**values))
