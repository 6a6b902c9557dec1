"""The completion model: every command of the tree with its subcommands, flags and what each value
completes to, as ``superfluid completion`` renders it; kept as data in ``superfluid/command_index.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Kept as data (made by ``superfluid/command_index_build.py`` from the whole tree), so that printing
# a script, which every new shell does, loads no command module (benchmarks/bench_cli.py).

__all__ = ["Flag", "Command", "Model", "as_data", "from_data"]


@dataclass(frozen=True, slots=True)
class Flag:
    """A flag and the value it takes: ``""`` none, ``file``, ``dir``, ``text`` (typed), or ``words:a b``."""

    names: tuple[str, ...]
    value: str = ""


@dataclass
class Command:
    """One command of the tree: its subcommands, its flags and what its positionals complete to."""

    path: str
    subcommands: list[str] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    positionals: list[str] = field(default_factory=list)  # "words:…" | "file" | "dir" | "text"
    by_id: dict[str, list[Flag]] = field(default_factory=dict)  # runtime check: each runtime's options


@dataclass
class Model:
    commands: list[Command]


def as_data(m: Model) -> tuple[Any, ...]:
    """``m`` as nested tuples of strings (what ``command_index.MODEL`` holds)."""
    return tuple((c.path, tuple(c.subcommands), tuple((f.names, f.value) for f in c.flags), tuple(c.positionals),
                  tuple((rid, tuple((f.names, f.value) for f in flags)) for rid, flags in c.by_id.items()))
                 for c in m.commands)


def from_data(data: Sequence[Any]) -> Model:
    """The model ``as_data`` gave."""
    return Model([Command(path, list(subs), [Flag(tuple(n), v) for n, v in flags], list(pos),
                          {rid: [Flag(tuple(n), v) for n, v in fl] for rid, fl in by_id})
                  for path, subs, flags, pos, by_id in data])
