"""Which verified releases drive an engine, newest first, each with why.

See docs/manifest-service.md, "The API".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.manifest.index import Good, Index
from superfluid.manifest.routes import PLATFORMS, Choose, ReleaseOne, value_usable
from superfluid.runtime import registry

__all__ = ["choose", "choose_routes"]


def _row(release: Good, q: Choose) -> dict[str, Any]:
    head = {"version": release.version, "name": release.name, "path": ReleaseOne(release.version).path}
    part = (release.compat.get("runtimes") or {}).get(q.runtime)
    if not isinstance(part, Mapping):
        return {**head, "by": None, "short": f"no {q.runtime}",
                "why": f"{release.name} {release.version} ships no {q.runtime} adapter"}
    verdict = registry.presentation(q.runtime).judge(part, q.kind, q.value, q.platform,
                                                     f"{release.name} {release.version}")
    return {**head, **verdict}


def choose(index: Index, q: Choose) -> dict[str, Any]:
    """The answer of ``/v1/choose/...``: ``drives`` (newest first, each with ``by``, ``short`` and
    ``why``), ``others`` (the verified releases that do not, with why) and ``rejected``."""
    rows = [_row(release, q) for release in index.releases]
    question = registry.presentation(q.runtime).question(q.kind)
    value: int | str = int(q.value) if question is not None and question.number else q.value
    return {"asked": {"runtime": q.runtime, q.kind: value, "platform": q.platform}, "question": q.asked,
            "path": q.path, "drives": [r for r in rows if r["by"] is not None],
            "others": [r for r in rows if r["by"] is None], "rejected": [r.to_json() for r in index.rejected]}


def _named(release: Good) -> Iterator[tuple[str, str, str]]:
    """``(runtime, kind, value)`` of every value a release's document names (each runtime's ``Presentation.named``)."""
    runtimes = release.compat.get("runtimes") or {}
    for runtime_id in registry.IDS:
        part = runtimes.get(runtime_id)
        if isinstance(part, Mapping):
            yield from ((runtime_id, kind, value) for kind, value in registry.presentation(runtime_id).named(part))


def choose_routes(index: Index) -> list[Choose]:
    """The choose paths a static export holds: every value a verified release names (e.g. the ABI it
    requires, its tested builds), on every platform and on none. Other values are answered by the
    server alone."""
    values = sorted({v for release in index.releases for v in _named(release) if value_usable(*v)})
    return [Choose(runtime, kind, value, platform) for runtime, kind, value in values
            for platform in (None, *PLATFORMS)]
