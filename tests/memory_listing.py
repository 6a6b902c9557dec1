"""An in-memory release listing for planner tests: the planning interface's ``Listing`` over
releases held in memory, recording each small asset a planner reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Asset:
    name: str
    url: str = ""
    size: int | None = 10
    digest: str | None = None

    def __post_init__(self) -> None:
        if not self.url:
            object.__setattr__(self, "url", f"http://mirror.test/{self.name}")


@dataclass(frozen=True)
class Release:
    tag: str
    assets: tuple[Asset, ...] = field(default_factory=tuple)
    prerelease: bool = False


class MemoryListing:
    """Releases in memory; ``texts`` maps ``(tag, asset name)`` to the text ``text`` answers."""

    def __init__(self, releases: Sequence[Release], texts: Mapping[tuple[str, str], str] | None = None, *,
                 repo: str = "owner/repo") -> None:
        self.repo = repo
        self._releases = list(releases)
        self._texts = dict(texts or {})
        self.read: list[tuple[str, str]] = []

    def releases(self) -> list[Release]:
        return self._releases

    def release(self, tag: str, *, optional: bool = False) -> Release | None:
        found = next((r for r in self._releases if r.tag == tag), None)
        if found is None and not optional:
            raise LookupError(f"{self.repo}: release {tag} not found")
        return found

    def text(self, release: Release, asset: Asset) -> str:
        self.read.append((release.tag, asset.name))
        return self._texts[(release.tag, asset.name)]

    def asset_url(self, tag: str, name: str) -> str:
        return f"http://mirror.test/{tag}/{name}"
