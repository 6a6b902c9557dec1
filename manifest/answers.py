"""The manifest service's answers as bytes, the same for the server and the static export.

See docs/manifest-service.md, "The API".
"""

from __future__ import annotations

import html
import json
from typing import Any, NamedTuple

from superfluid.manifest.choose import choose, choose_routes
from superfluid.manifest.index import Good, Index
from superfluid.manifest.routes import Choose, Page, ReleaseList, ReleaseOne, Route
from superfluid.runtime import registry

__all__ = ["Body", "JSON", "HTML", "encode", "error_body", "render", "releases_answer", "drives_cells"]

JSON = "application/json; charset=utf-8"
HTML = "text/html; charset=utf-8"


class Body(NamedTuple):
    """An answer: HTTP status, content type and the bytes."""

    status: int
    content_type: str
    data: bytes


def encode(doc: Any) -> bytes:
    """The bytes of a JSON answer."""
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def error_body(status: int, parameter: str, message: str, **extra: Any) -> Body:
    """``{"error": message, "parameter": name, "status": N, ...}``."""
    return Body(status, JSON, encode({"error": message, "parameter": parameter, "status": status, **extra}))


def releases_answer(index: Index) -> dict[str, Any]:
    """The answer of ``/v1/releases``: every verified release newest first, and the rejected."""
    return {"releases": [r.to_json() for r in index.releases], "rejected": [r.to_json() for r in index.rejected],
            "keys": list(index.keys), "signatures_required": bool(index.keys)}


def _release(index: Index, version: str) -> Body:
    good = index.release(version)
    if good is not None:
        return Body(200, JSON, encode(good.to_json()))
    refused = index.rejection(version)
    if refused is not None:
        return error_body(404, "version", f"release {version} was rejected: {refused.reason}",
                          rejected=refused.to_json())
    known = ", ".join(r.version for r in index.releases) or "none"
    return error_body(404, "version", f"no verified release {version} (verified: {known})")


def render(index: Index, route: Route) -> Body:
    """The answer to ``route`` (anything but ``Health``, which describes the running service)."""
    if isinstance(route, ReleaseList):
        return Body(200, JSON, encode(releases_answer(index)))
    if isinstance(route, ReleaseOne):
        return _release(index, route.version)
    if isinstance(route, Choose):
        return Body(200, JSON, encode(choose(index, route)))
    if isinstance(route, Page):
        return Body(200, HTML, page(index).encode("utf-8"))
    raise TypeError(f"no rendering for {route!r}")


# -- the page a person reads ------------------------------------------------------------------------

_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse}"
          "td,th{border-bottom:1px solid #ddd;padding:.3em .8em;text-align:left;vertical-align:top}"
          "code{font-size:.95em}")


def _cell(text: object) -> str:
    return f"<td>{html.escape(str(text))}</td>"


def _link(path: str, text: str | None = None) -> str:
    return f'<a href="{html.escape(path.lstrip("/"))}">{html.escape(text or path)}</a>'


def drives_cells(release: Good) -> list[str]:
    """What a release drives, one short cell per runtime this superfluid ships (``Presentation.drives_cell``;
    ``-`` for none): the index page's and ``check``'s table."""
    runtimes = release.compat.get("runtimes") or {}
    return [registry.presentation(rid).drives_cell(part) if isinstance(part := runtimes.get(rid), dict) else "-"
            for rid in registry.IDS]


def _choose_paths() -> str:
    """``<code>/v1/choose/basert/abi/&lt;N&gt;.json</code>, ...``: every question's path, on the page."""
    return ", ".join(f"<code>/v1/choose/{html.escape(rid)}/{html.escape(q.kind)}/&lt;{html.escape(q.sample)}&gt;.json"
                     f"</code>{html.escape(q.note)}"
                     for rid in registry.IDS for q in registry.presentation(rid).questions)


def _columns() -> str:
    return "".join(f"<th>{html.escape(p.column or p.id)}</th>" for p in map(registry.presentation, registry.IDS))


def page(index: Index) -> str:
    """``index.html``: the releases, the rejected ones and every exported answer, linked."""
    rows = "".join(
        "<tr>" + f"<td>{_link(ReleaseOne(r.version).path, r.version)}</td>" + _cell(r.name)
        + _cell(r.main.verdict.key_id or "not checked (no keys)") + _cell(r.main.attested_by or "-")
        + "".join(_cell(c) for c in drives_cells(r)) + "</tr>"
        for r in index.releases)
    refused = "".join("<tr>" + _cell(r.version or "?") + _cell(r.where) + _cell(r.reason) + "</tr>"
                      for r in index.rejected)
    answers = "".join(f"<li>{_link(q.path, q.asked)}</li>" for q in choose_routes(index) if q.platform is None)
    keys = ", ".join(index.keys) or "none (signatures are not checked)"
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>superfluid compat manifest</title>"
        f"<style>{_STYLE}</style></head><body>\n<h1>superfluid compat manifest</h1>\n"
        f"<p>Which superfluid release drives your engine. Trusted keys: {html.escape(keys)}. As JSON: "
        f"{_link(ReleaseList.path)}; one release: <code>/v1/releases/&lt;version&gt;.json</code>; which releases "
        f"drive an engine: {_choose_paths()}, each also per platform (<code>.../&lt;value&gt;/linux-x64.json</code>)."
        "</p>\n"
        f"<h2>Verified releases, newest first</h2>\n<table><tr><th>version</th><th>name</th><th>signed by</th>"
        f"<th>attested by</th>{_columns()}</tr>{rows}</table>\n"
        f"<h2>Rejected (never chosen)</h2>\n<table><tr><th>version</th><th>where</th><th>reason</th></tr>{refused}"
        f"</table>\n<h2>Answers</h2>\n<ul>{answers}</ul>\n</body></html>\n")
