"""The commands that fix what is wrong with a runtime's installs, as ``Fix`` values, each built in one
place (docs/cli.md, "Hints")."""

from __future__ import annotations

from superfluid.runtime.kernel.fixes import Fix

# Every refusal of the home that suggests a next step carries one of these: a runtime that is not
# installed, an install name that is not there, an install to remove. The repair of a broken install
# is ``runtime.kernel.fixes.repair``.

__all__ = ["install_it", "list_them", "remove_it"]


def install_it(runtime_id: str) -> Fix:
    """``superfluid runtime install <id>``: the runtime is not installed."""
    return Fix.superfluid("runtime", "install", runtime_id, does="installs it")


def list_them(runtime_id: str) -> Fix:
    """``superfluid runtime list <id>``: an install named that is not there."""
    return Fix.superfluid("runtime", "list", runtime_id, does="lists its installs")


def remove_it(runtime_id: str, install: str) -> Fix:
    """``superfluid runtime remove <id> <install>``: an install that nothing puts back, or one left behind."""
    return Fix.superfluid("runtime", "remove", runtime_id, install, does="removes it")
