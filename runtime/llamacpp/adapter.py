"""The llama.cpp adapter's declarations: compat, versions and options, from the recipe alone."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from superfluid.runtime.adapter import Adapter, built_by_of
from superfluid.runtime.kernel.errors import LibraryNotFound
from superfluid.runtime.kernel.layout import has_install_of
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import options_json
from superfluid.runtime.llamacpp.locate import locate
from superfluid.runtime.llamacpp.planner import plan
from superfluid.runtime.llamacpp.recipe import tested, tested_of
from superfluid.runtime.planning import Listing, NotInstallable, Plan, Request

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host

__all__ = ["ADAPTER", "LlamacppAdapter"]


class LlamacppAdapter(Adapter):
    """llama.cpp: a new build every few hours; this adapter drives the builds it was tested with."""

    id = "llamacpp"
    package = "superfluid.runtime.llamacpp"
    recipe_schema = "llamacpp-recipe"
    options_from = "superfluid.runtime.llamacpp.options"
    formats_from = "superfluid.runtime.llamacpp.formats"
    presentation_from = "superfluid.runtime.llamacpp.presentation"
    receipt_keys = ("layout",)
    plans_from_recipe = True

    def compat(self) -> dict[str, Any]:
        """The builds it was built and tested against, newest first, each with its struct layout."""
        builds = []
        for b in tested(self.recipe):
            entry: dict[str, Any] = {"build": b.version, "layout": b.layout}
            if b.published:
                entry["published"] = b.published
            builds.append(entry)
        return {"tested": builds, "options": options_json(self.options()), "built_by": built_by_of(self)}

    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Each tested build, newest first: what it installs here first (``b11642-cpu``) or why nothing;
        ``refused``: each plan of it refused here by its recorded needs, and why."""
        part = compat_part if compat_part is not None else self.compat()
        rows = []
        for b in (tested(self.recipe) if compat_part is None else tested_of(self.recipe, compat_part)):
            refused: list[Plan] = []
            try:
                plans = self.plan_for(Request(id=self.id, version=b.version), host, None, part)
                refused = [p for p in plans if p.refused is not None]
                first = next((p for p in plans if p.refused is None), None)
                if first is None:
                    raise NotInstallable("; ".join(str(p.refused) for p in refused))
            except NotInstallable as e:
                installs: bool | str = e.message
                install = backend = None
                digest = None
            else:
                installs, install, backend = True, first.install, first.backend
                digest = "pinned" if all(a.pin for a in first.assets) else "release"
            row: dict[str, Any] = {"version": b.version, "layout": b.layout, "installs": installs,
                                   "install": install,
                                   "installed": has_install_of(installed, b.version),
                                   "tested": True,
                                   "platforms": sorted({a.platform for a in b.archives if not a.cudart})}
            if b.published:
                row["published"] = b.published
            if backend is not None:
                row["backend"] = backend
                row["digest"] = digest
            if refused:
                row["refused"] = [{"install": p.install, "why": p.refused} for p in refused]
            rows.append(row)
        return rows

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        """The plans of the builds ``compat_part`` lists as tested (ours: the recipe's), newest first, in
        backend order (``planner.plan``)."""
        return plan(request, self.recipe, host, listing, builds=tested_of(self.recipe, compat_part))

    def nothing_to_load(self, lookup: Lookup, worker: str) -> LibraryNotFound | None:
        """Why ``worker``'s plain ``check`` would find no libllama: the search it would make, made
        here without loading anything (None: there is one, and only the worker may load it)."""
        try:
            locate(None, lookup, executable=worker)
        except LibraryNotFound as e:
            return e  # as its worker's report says it (``contract.refuse``), its fixes values
        return None


ADAPTER = LlamacppAdapter()
