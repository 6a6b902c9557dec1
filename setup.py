"""The packages: superfluid's own and each adapter's folder ``runtime/<id>/`` (found, so a new engine adds
no line here); everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup

_OWN = ["superfluid", "superfluid.commands", "superfluid.installer", "superfluid.manifest", "superfluid.runtime",
        "superfluid.schemas"]
#: the installer's layers, each a sub-package (docs/architecture.md)
_LAYERS = sorted("superfluid.installer." + ".".join(p.parent.relative_to(Path(__file__).parent / "installer").parts)
                 for p in Path(__file__).parent.glob("installer/*/**/__init__.py"))
_ADAPTERS = sorted(f"superfluid.runtime.{p.parent.name}" for p in Path(__file__).parent.glob("runtime/*/__init__.py"))

setup(packages=_OWN + _LAYERS + _ADAPTERS)
