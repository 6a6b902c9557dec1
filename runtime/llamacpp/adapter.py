"""The llama.cpp adapter's declarations: compat, versions and options, from the recipe alone.

The face answers these in its own process; it never loads libllama (SPEC §2): only ``check`` loads
it, in ``superfluid-worker-llamacpp``, started when ``nothing_to_load`` finds a library to check.
Importing this module loads no native code: the recipe, the planner and the option declarations
are pure Python.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from superfluid.runtime.adapter import Adapter

if TYPE_CHECKING:
    from superfluid.runtime.host import Host
    from superfluid.runtime.options import Option
    from superfluid.runtime.planning import Listing, Plan, Request

__all__ = ["ADAPTER", "LlamacppAdapter"]


class LlamacppAdapter(Adapter):
    """llama.cpp: a new build every few hours; this adapter drives the builds it was tested with."""

    id = "llamacpp"
    package = "superfluid.runtime.llamacpp"
    recipe_schema = "llamacpp-recipe"
    receipt_keys = ("layout",)

    def compat(self) -> dict[str, Any]:
        """The builds it was built and tested against, newest first, each with its struct layout."""
        from superfluid.runtime.llamacpp.recipe import tested
        from superfluid.runtime.options import options_json

        builds = []
        for b in tested(self.recipe):
            entry: dict[str, Any] = {"build": b.version, "layout": b.layout}
            if b.published:
                entry["published"] = b.published
            builds.append(entry)
        return {"tested": builds, "options": options_json(self.options())}

    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Each tested build, newest first: what it installs here first (``b11642-cpu``) or why nothing."""
        from superfluid.runtime.llamacpp.recipe import tested, tested_of
        from superfluid.runtime.planning import NotInstallable, Request

        part = compat_part if compat_part is not None else self.compat()
        rows = []
        for b in (tested(self.recipe) if compat_part is None else tested_of(self.recipe, compat_part)):
            try:
                first = self.plan_for(Request(self.id, version=b.version), host, None, part)[0]
            except NotInstallable as e:
                installs: bool | str = e.message
                install = backend = None
                digest = None
            else:
                installs, install, backend = True, first.install, first.backend
                digest = "pinned" if all(a.pin for a in first.assets) else "release"
            row: dict[str, Any] = {"version": b.version, "layout": b.layout, "installs": installs,
                                   "install": install,
                                   "installed": any(n.startswith(f"{b.version}-") for n in installed),
                                   "tested": True,
                                   "platforms": sorted({a.platform for a in b.archives if not a.cudart})}
            if b.published:
                row["published"] = b.published
            if backend is not None:
                row["backend"] = backend
                row["digest"] = digest
            rows.append(row)
        return rows

    def options(self) -> list[Option]:
        from superfluid.runtime.llamacpp.options import OPTIONS

        return list(OPTIONS)

    def formats(self) -> list[dict[str, Any]]:
        from superfluid.runtime.llamacpp.check import FORMATS

        return [dict(f) for f in FORMATS]

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        """The plans of the builds ``compat_part`` lists as tested (ours: the recipe's), newest first, in
        backend order (``planner.plan``)."""
        from superfluid.runtime.llamacpp.planner import plan
        from superfluid.runtime.llamacpp.recipe import tested_of

        return plan(request, self.recipe, host, listing, builds=tested_of(self.recipe, compat_part))

    def nothing_to_load(self, environ: Mapping[str, str], worker: str) -> str | None:
        """Why ``worker``'s plain ``check`` would find no libllama: the search it would make, made
        here without loading anything (None: there is one, and only the worker may load it)."""
        from superfluid.runtime.errors import LibraryNotFound
        from superfluid.runtime.llamacpp.locate import locate

        try:
            locate(None, environ, executable=worker)
        except LibraryNotFound as e:
            return str(e)
        return None


ADAPTER = LlamacppAdapter()
