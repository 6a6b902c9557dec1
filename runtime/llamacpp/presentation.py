"""How llama.cpp is shown: the builds a release was tested against, and the manifest's question by build.

See docs/adapters.md, "How it is shown".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.runtime.llamacpp.recipe import find_tested, listed
from superfluid.runtime.presentation import Presentation, Question, ServeFlag, Shown

__all__ = ["LlamacppPresentation", "PRESENTATION"]


class LlamacppPresentation(Presentation):
    """llama.cpp is asked by build: a release drives the builds it was built and tested against."""

    #: what the compat manifest is asked about llama.cpp: a build
    questions = (Question(kind="build", pattern=r"b[1-9][0-9]{0,9}", expected="a llama.cpp build, e.g. b11642",
                          metavar="B", placeholder="bNNNN", flag="a build, e.g. b11642"),)
    serve_flags = (ServeFlag("lib", "P", "the libllama file or directory to serve with (else SUPERFLUID_LLAMA_LIB, "
                                         "else the install's)"),
                   ServeFlag("parallel", "N", "requests decoded together, one step for all (default 4; the KV "
                                              "cache holds N times --max-context)"))
    column = "llama.cpp builds"

    def judge(self, part: Mapping[str, Any], kind: str, value: str, platform: str | None,
              release: str) -> dict[str, Any]:
        """Whether build ``value`` is one the part lists as tested (``recipe.find_tested``, the rule the
        planner installs by without ``--untested``)."""
        builds = listed(part)
        hit = find_tested(builds, value)
        if hit is not None:
            return {"by": "tested", "short": f"tested (layout {hit.layout})", "layout": hit.layout,
                    "why": f"{value} is a build {release} was built and tested against (layout {hit.layout})"}
        names = ", ".join(b.version for b in builds)
        return {"by": None, "short": "not tested", "layout": None,
                "why": f"{value} is not a build {release} was tested against (tested: {names}); it installs only "
                       f"with --untested"}

    def named(self, part: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """Each tested build."""
        return (("build", str(t["build"])) for t in part["tested"])

    def drives_cell(self, part: Mapping[str, Any]) -> str:
        return ", ".join(t["build"] for t in part["tested"])

    def shown(self, part: Mapping[str, Any]) -> Shown:
        rows = tuple((t.get("build", "?"), t.get("layout", "?"), t.get("published") or "-") for t in part["tested"])
        return Shown(f"{self.id}: built and tested against these llama.cpp builds", ("BUILD", "LAYOUT", "PUBLISHED"),
                     rows)

    def version_note(self, row: Mapping[str, Any]) -> str:
        if "layout" not in row:
            return ""
        return f"layout {row['layout']}" + (f", published {row['published']}" if row.get("published") else "")


PRESENTATION = LlamacppPresentation("llamacpp")
