"""``superfluid runtime options <id>``: the options a runtime takes on serve, asked through the catalog.

See docs/cli.md.
"""

from __future__ import annotations

from superfluid.declarations import READS_HOME, run
from superfluid.parser import Help, Parser, add_json, exits

__all__ = ["HELP", "READS_HOME", "arguments", "run"]

HELP = Help(
    "the options a runtime takes on serve",
    "The options the runtime takes, their defaults and accepted values. On serve they are spelled "
    "--<id>-<option> V; on runtime check and to the worker, --<option> V.",
    ("superfluid runtime options llamacpp", "superfluid runtime options basert --json"),
    exits(_0="answered", _1="the runtime's worker failed, hung or answered something else"),
)


def arguments(p: Parser) -> None:
    p.add_argument("id")
    add_json(p)
