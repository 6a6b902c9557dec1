"""Makes ``superfluid/command_index.py`` from the whole command tree (the overview's rows and the
completion model): ``.venv/bin/python -m superfluid.command_index_build`` after a command's flags or
help change; a test holds the file equal to what this makes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from pprint import pformat

from superfluid.completion_model import Command, Flag, Model, as_data
from superfluid.installer.fleet.plans import HOSTS, PLATFORMS
from superfluid.parser import children, overview_rows, walk
from superfluid.parser import parser as tree
from superfluid.runtime import registry

# ``superfluid``, ``superfluid --help`` and ``superfluid completion SHELL`` read that file and load no
# command module: 0.33 to 0.47 s on a loaded machine when they built the whole tree, now within 2.6x a
# bare start (benchmarks/bench_cli.py).

__all__ = ["model", "index_source", "INDEX", "main"]

#: the generated module
INDEX = Path(__file__).resolve().parent / "command_index.py"
#: the width its values are written in (the line length is 120; ``ROWS = `` and ``MODEL = `` come first)
_WIDTH = 110


def _named_values() -> dict[str, str]:
    """The flags whose values are a known list, whatever command takes them: ``--runtime`` and
    ``--upgrade`` a runtime id, ``--backend`` a kind of machine, ``--platform`` a platform."""
    ids = "words:" + " ".join(registry.IDS)
    return {"--runtime": ids, "--upgrade": ids, "--backend": "words:" + " ".join(HOSTS),
            "--platform": "words:" + " ".join(PLATFORMS)}


def _value_of(action: argparse.Action, named: dict[str, str] | None = None) -> str:
    """How a flag's or positional's value completes, from its choices, its name or its metavar."""
    if action.choices:
        return "words:" + " ".join(map(str, action.choices))
    for flag in action.option_strings:
        if named and flag in named:
            return named[flag]
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                           argparse._CountAction, argparse._StoreConstAction)):
        return ""
    metavar = str(action.metavar or action.dest or "").upper()
    if "PATH" in metavar or "FILE" in metavar:
        return "file"
    if "DIR" in metavar:
        return "dir"
    return "text"


def _option_flags(runtime_id: str) -> list[Flag]:
    """``runtime check <id>``'s flags: ``--model``, ``--json`` and the runtime's declared options."""
    flags = [Flag(("-h", "--help")), Flag(("--json",)), Flag(("--model",), "file")]
    for option in registry.get(runtime_id).options():
        if option.kind == "enum":
            value = "words:" + " ".join(option.values)
        elif option.kind == "bool":
            value = "words:true false"
        elif option.kind == "path":
            value = "file"
        else:
            value = "text"
        flags.append(Flag((f"--{option.name}", f"--{runtime_id}-{option.name}"), value))
    return flags


def _serve_options(given: list[Flag]) -> list[Flag]:
    """``serve``'s ``--<id>-<option>`` flags: every option of every runtime, beside the ones its
    help page already shows."""
    have = {n for f in given for n in f.names}
    return [Flag((f.names[-1],), f.value) for rid in registry.IDS for f in _option_flags(rid)
            if len(f.names) == 2 and f.names[-1] not in have]


def model(top: argparse.ArgumentParser) -> Model:
    """The completion model of the whole tree. An ``install`` positional completes to the install
    names under ``$SUPERFLUID_HOME/runtimes/<id>/``, read by the shell when it completes."""
    named = _named_values()
    commands: list[Command] = []
    for path, parser in walk(top):
        command = Command(path, subcommands=list(children(parser)))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                continue  # serve's runtime options not shown among its flags: added below
            if action.option_strings:
                command.flags.append(Flag(tuple(action.option_strings), _value_of(action, named)))
            elif action.nargs == argparse.REMAINDER:
                command.by_id = {rid: _option_flags(rid) for rid in registry.IDS}
            elif action.dest == "id":
                command.positionals.append("words:" + " ".join(registry.IDS))
            elif action.dest == "install":
                command.positionals.append("installs")
            else:
                command.positionals.append(_value_of(action))
        if path == "serve":
            command.flags += _serve_options(command.flags)
        commands.append(command)
    return Model(commands)


# --- bash and zsh: the same POSIX case tables --------------------------------------------------------------


def index_source() -> str:
    """The text of ``superfluid/command_index.py`` for the tree this superfluid has."""
    top = tree()
    return ('"""The command tree as data, for the lines that must not load every command (generated by\n'
            'superfluid/command_index_build.py; do not edit: write it again with\n'
            '``.venv/bin/python -m superfluid.command_index_build``)."""\n\n'
            "from __future__ import annotations\n\n"
            '__all__ = ["ROWS", "MODEL"]\n\n'
            "#: the overview's rows: (synopsis, summary) of every command\n"
            f"ROWS = {pformat(overview_rows(top), width=_WIDTH, compact=True)}\n\n"
            "#: the completion model (superfluid.completion_model.as_data)\n"
            f"MODEL = {pformat(as_data(model(top)), width=_WIDTH, compact=True)}\n")


def main(argv: list[str] | None = None) -> int:
    """Write ``superfluid/command_index.py``; 0."""
    INDEX.write_text(index_source(), encoding="utf-8")
    sys.stdout.write(f"{INDEX}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
