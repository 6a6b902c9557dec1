"""Which verified releases drive an engine, newest first, each with why (SPEC §10).

The answers call the rules the installer and the loader use, never a copy of them:

- baseRT: ``runtime.basert.abi.abi_verdict``, for a library stating ABI N (``abi``) or an
  unnumbered library of version V (``version``), against each release's ``requires.abi`` and
  ``unnumbered_line``: its ``by`` (``abi``, ``line`` or none), ``short`` and ``why``;
- llama.cpp: the release's tested-build list (``runtimes.llamacpp.tested[].build``), the list
  its adapter installs from without ``--untested``;
- MLX: the release's tested versions (``runtimes.mlx.installs[].mlx``) and its ``platforms``.

The order is the index's (``runtime.ordering.version_key``, newest first). A platform narrows the
answer only where the document states platforms for what the runtime drives (MLX's ``platforms``);
for baseRT it also lists, per release, the pins it installs on its own there. Rejected releases are
listed apart and never chosen. Pure: values in, a JSON-ready answer out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.manifest.index import Good, Index
from superfluid.manifest.routes import PLATFORMS, Choose, ReleaseOne, value_usable

__all__ = ["choose", "choose_routes"]


def _basert(release: Good, part: Mapping[str, Any], q: Choose) -> dict[str, Any]:
    from superfluid.runtime.basert.abi import abi_verdict, drives_of

    drives, line = drives_of(part)
    if q.kind == "abi":
        rule = abi_verdict(None, int(q.value), drives=drives, line=line)
    else:
        rule = abi_verdict(q.value, None, drives=drives, line=line)
    row: dict[str, Any] = {"by": rule.by, "short": rule.short, "why": rule.why,
                           "requires": dict(part["requires"]), "unnumbered_line": line}
    if q.platform is not None:
        row["installs"] = [p["version"] for p in part.get("installs") or [] if q.platform in (p.get("platforms") or [])]
    return row


def _llamacpp(release: Good, part: Mapping[str, Any], q: Choose) -> dict[str, Any]:
    tested = list(part["tested"])
    hit = next((t for t in tested if t["build"] == q.value), None)
    who = f"{release.name} {release.version}"
    if hit is not None:
        return {"by": "tested", "short": f"tested (layout {hit['layout']})", "layout": hit["layout"],
                "why": f"{q.value} is a build {who} was built and tested against (layout {hit['layout']})"}
    names = ", ".join(t["build"] for t in tested)
    return {"by": None, "short": "not tested", "layout": None,
            "why": f"{q.value} is not a build {who} was tested against (tested: {names}); it installs only "
                   f"with --untested"}


def _mlx(release: Good, part: Mapping[str, Any], q: Choose) -> dict[str, Any]:
    platforms = list(part["platforms"])
    who = f"{release.name} {release.version}"
    if q.platform is not None and q.platform not in platforms:
        return {"by": None, "short": f"not on {q.platform}",
                "why": f"{who} runs mlx on {', '.join(platforms)} only"}
    hit = next((i for i in part["installs"] if i["mlx"] == q.value), None)
    if hit is not None:
        return {"by": "tested", "short": f"tested, with mlx-lm {hit['mlx_lm']} on Python {hit['python']}",
                "why": f"mlx {q.value} is a version {who} was tested with (mlx-lm {hit['mlx_lm']}, Python "
                       f"{hit['python']}, on {', '.join(platforms)})"}
    names = ", ".join(i["mlx"] for i in part["installs"])
    return {"by": None, "short": "not tested", "why": f"mlx {q.value} is not a version {who} was tested with "
                                                      f"(tested: {names})"}


_JUDGES = {"basert": _basert, "llamacpp": _llamacpp, "mlx": _mlx}


def _row(release: Good, q: Choose) -> dict[str, Any]:
    head = {"version": release.version, "name": release.name, "path": ReleaseOne(release.version).path}
    part = (release.compat.get("runtimes") or {}).get(q.runtime)
    if not isinstance(part, Mapping):
        return {**head, "by": None, "short": f"no {q.runtime}",
                "why": f"{release.name} {release.version} ships no {q.runtime} adapter"}
    return {**head, **_JUDGES[q.runtime](release, part, q)}


def choose(index: Index, q: Choose) -> dict[str, Any]:
    """The answer of ``/v1/choose/...``: ``drives`` (newest first, each with ``by``, ``short`` and
    ``why``), ``others`` (the verified releases that do not, with why) and ``rejected``."""
    rows = [_row(release, q) for release in index.releases]
    value: int | str = int(q.value) if q.kind == "abi" else q.value
    return {"asked": {"runtime": q.runtime, q.kind: value, "platform": q.platform}, "question": q.asked,
            "path": q.path, "drives": [r for r in rows if r["by"] is not None],
            "others": [r for r in rows if r["by"] is None], "rejected": [r.to_json() for r in index.rejected]}


def _named(release: Good) -> Iterator[tuple[str, str, str]]:
    """``(runtime, kind, value)`` of every value a release's document names."""
    runtimes = release.compat.get("runtimes") or {}
    basert = runtimes.get("basert")
    if isinstance(basert, Mapping):
        yield "basert", "abi", str(basert["requires"]["abi"])
        for pin in basert.get("installs") or []:
            yield ("basert", "abi", str(pin["abi"])) if pin.get("abi") is not None else ("basert", "version",
                                                                                           str(pin["version"]))
    llamacpp = runtimes.get("llamacpp")
    if isinstance(llamacpp, Mapping):
        yield from (("llamacpp", "build", str(t["build"])) for t in llamacpp["tested"])
    mlx = runtimes.get("mlx")
    if isinstance(mlx, Mapping):
        yield from (("mlx", "version", str(i["mlx"])) for i in mlx["installs"])


def choose_routes(index: Index) -> list[Choose]:
    """The choose paths a static export holds: every value a verified release names (the ABI it
    requires and its pins', its unnumbered pins' versions, its tested builds and MLX versions), on
    every platform and on none. Other values are answered by the server alone."""
    values = sorted({v for release in index.releases for v in _named(release) if value_usable(v[1], v[2])})
    return [Choose(runtime, kind, value, platform) for runtime, kind, value in values
            for platform in (None, *PLATFORMS)]
