"""The adapter interface: what every runtime declares (SPEC §2, §5.2, §6.2–6.5).

An adapter is one package ``runtime/<id>/`` exposing one ``Adapter`` subclass. Its declarations come
from its recipe alone (no network, no native code), so the face can ask them on every run:

- ``compat()``: its part of the release's compat document (§5.2);
- ``versions(host, installed)``: each version it installs on its own, newest first, planned for
  ``host``: ``{"version", "installs": true | "<reason>", "install": "<version>-<backend>" | null,
  "installed": bool, "tested": bool, ...}``;
- ``options()``: the options it takes on serve (``superfluid.runtime.options.Option``).

The registry (``superfluid.runtime.registry``) names the adapters this release ships.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from superfluid.runtime.errors import BadFile

if TYPE_CHECKING:
    from superfluid.runtime.host import Host
    from superfluid.runtime.options import Option

__all__ = ["Adapter", "load_recipe"]


def load_recipe(package: str, schema: str | None = None) -> dict[str, Any]:
    """Read and validate ``recipe.json`` of an adapter package (the trust root, §5.1).

    Raises:
        BadFile: the recipe is not JSON or does not match its schema (names the JSON path).
    """
    from importlib import resources

    ref = resources.files(package) / "recipe.json"
    where = str(ref)
    try:
        data = json.loads(ref.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadFile(where, f"not a readable JSON recipe ({e})") from e
    if schema is not None:
        from superfluid.runtime.schema import validate

        validate(data, schema, where)
    if not isinstance(data, dict):
        raise BadFile(where, "a recipe is a JSON object")
    return data


class Adapter(ABC):
    """One runtime's declarations. Subclasses set ``id`` and implement the three declarations."""

    id: ClassVar[str]
    #: answers in process (basert); otherwise the face asks its worker
    linked: ClassVar[bool] = False
    #: the package holding recipe.json
    package: ClassVar[str]
    #: the recipe's schema name in schemas/ (without .schema.json), or None
    recipe_schema: ClassVar[str | None] = None

    @cached_property
    def recipe(self) -> dict[str, Any]:
        return load_recipe(self.package, self.recipe_schema)

    @abstractmethod
    def compat(self) -> dict[str, Any]:
        """This adapter's part of the compat document (SPEC §5.2)."""

    @abstractmethod
    def versions(self, host: Host, installed: Collection[str]) -> list[dict[str, Any]]:
        """Versions it installs on its own, newest first, planned for ``host`` (recipe alone)."""

    @abstractmethod
    def options(self) -> list[Option]:
        """The options the runtime takes on serve (SPEC §7)."""

    def check(self, argv: list[str], environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        """A linked adapter's in-process ``check``: the worker's report and exit code (SPEC §6.5).

        Only linked adapters answer in process; the others are asked through their worker.
        """
        raise NotImplementedError(f"the {self.id} adapter is not linked; ask its worker")
