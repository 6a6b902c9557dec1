"""The fixes the kernel's records name (runtime/kernel/fixes.py)."""

from __future__ import annotations

from superfluid.runtime.kernel.fixes import puts_back, repair_command


def test_the_repair_of_an_install_is_one_command() -> None:
    assert repair_command("basert", "0.4.0-cpu") == "superfluid runtime repair basert 0.4.0-cpu"
    assert puts_back("llamacpp", "b1-cpu") == "`superfluid runtime repair llamacpp b1-cpu` puts it back"
