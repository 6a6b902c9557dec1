"""The fixes the kernel's records name: the one command that puts an install back."""

from __future__ import annotations

__all__ = ["REPAIR_FIX", "repair_command", "puts_back"]


#: the fix of a broken install (a ``*FIX*`` constant: tests/face/test_hints.py checks its command)
REPAIR_FIX = "`superfluid runtime repair {id} {install}` puts it back"


def repair_command(runtime_id: str, install: str) -> str:
    """The command that puts an install back as its receipt records it."""
    return REPAIR_FIX.split("`")[1].format(id=runtime_id, install=install)


def puts_back(runtime_id: str, install: str) -> str:
    """The fix of a broken install: its ``repair_command``, quoted."""
    return REPAIR_FIX.format(id=runtime_id, install=install)
