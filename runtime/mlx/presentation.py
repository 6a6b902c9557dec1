"""How MLX is shown: the mlx versions a release was tested with, on its platforms, and the manifest's question.

See docs/adapters.md, "Worked example: MLX".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.runtime.presentation import Presentation, Question, Shown

__all__ = ["MlxPresentation", "PRESENTATION"]


class MlxPresentation(Presentation):
    """MLX is asked by mlx version: a release drives the versions it was tested with, on its platforms."""

    #: what the compat manifest is asked about MLX: an mlx version
    questions = (Question(kind="version", flag="an mlx version"),)
    column = "MLX"

    def judge(self, part: Mapping[str, Any], kind: str, value: str, platform: str | None,
              release: str) -> dict[str, Any]:
        """Whether mlx ``value`` is a version the part lists as tested, on its platforms."""
        platforms = list(part["platforms"])
        if platform is not None and platform not in platforms:
            return {"by": None, "short": f"not on {platform}",
                    "why": f"{release} runs mlx on {', '.join(platforms)} only"}
        hit = next((i for i in part["installs"] if i["mlx"] == value), None)
        if hit is not None:
            return {"by": "tested", "short": f"tested, with mlx-lm {hit['mlx_lm']} on Python {hit['python']}",
                    "why": f"mlx {value} is a version {release} was tested with (mlx-lm {hit['mlx_lm']}, Python "
                           f"{hit['python']}, on {', '.join(platforms)})"}
        names = ", ".join(i["mlx"] for i in part["installs"])
        return {"by": None, "short": "not tested",
                "why": f"mlx {value} is not a version {release} was tested with (tested: {names})"}

    def named(self, part: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """Each tested mlx version."""
        return (("version", str(i["mlx"])) for i in part["installs"])

    def drives_cell(self, part: Mapping[str, Any]) -> str:
        return ", ".join(i["mlx"] for i in part["installs"]) + f" ({', '.join(part['platforms'])})"

    def shown(self, part: Mapping[str, Any]) -> Shown:
        rows = tuple((i.get("mlx", "?"), i.get("mlx_lm", "?"), i.get("python", "?")) for i in part["installs"])
        return Shown(f"{self.id}: installs on {', '.join(part.get('platforms') or []) or '-'}",
                     ("MLX", "MLX-LM", "PYTHON"), rows)

    def version_note(self, row: Mapping[str, Any]) -> str:
        return f"mlx-lm {row['mlx_lm']}, Python {row.get('python', '?')}" if "mlx_lm" in row else ""


PRESENTATION = MlxPresentation("mlx")
