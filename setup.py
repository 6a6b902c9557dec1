"""The packages: superfluid's own and each adapter's folder ``runtime/<id>/`` (found, so a new engine adds
no line here); everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup

_OWN = ["superfluid", "superfluid.commands", "superfluid.installer", "superfluid.manifest", "superfluid.runtime",
        "superfluid.schemas"]
_ADAPTERS = sorted(f"superfluid.runtime.{p.parent.name}" for p in Path(__file__).parent.glob("runtime/*/__init__.py"))

setup(packages=_OWN + _ADAPTERS)
