"""The llama.cpp recipe (the trust root) and the release archive names it speaks of."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from superfluid.runtime.adapter import load_recipe
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.ordering import version_key

__all__ = ["Archive", "TestedBuild", "parse_name", "load", "tested", "tested_of", "tested_record", "listed",
           "find_tested", "PACKAGE", "SCHEMA"]

PACKAGE = "superfluid.runtime.llamacpp"
SCHEMA = "llamacpp-recipe"

_NAME = re.compile(r"^(?P<cudart>cudart-)?llama-(?P<build>b\d+)-bin-(?P<os>ubuntu|macos)-(?P<rest>.+)\.tar\.gz$")


@dataclass(kw_only=True, frozen=True, slots=True)
class Archive:
    """One release archive: what its name says, and what the recipe pins about it."""

    name: str
    build: str
    platform: str  # "linux-x64" ...
    backend: str  # "cpu", "metal", "cuda-13.4" ...
    cudart: bool = False  # a CUDA runtime side archive
    size: int | None = None
    sha256: str | None = None


def parse_name(name: str) -> Archive | None:
    """What an archive's name says, or None when it is not one this adapter knows.

    >>> parse_name("llama-b11284-bin-ubuntu-cuda-13.4-x64.tar.gz").backend
    'cuda-13.4'
    >>> parse_name("llama-b11284-bin-macos-arm64.tar.gz").backend
    'metal'
    >>> parse_name("llama-b11284-bin-win-cpu-x64.zip") is None
    True
    """
    m = _NAME.match(name)
    if not m:
        return None
    rest = m["rest"]
    backend, _, arch = rest.rpartition("-")
    if arch not in ("x64", "arm64"):
        return None
    os_name = "linux" if m["os"] == "ubuntu" else "macos"
    if not backend:
        backend = "metal" if (os_name, arch) == ("macos", "arm64") else "cpu"
    return Archive(name=name, build=m["build"], platform=f"{os_name}-{arch}", backend=backend,
                   cudart=bool(m["cudart"]))


@dataclass(frozen=True, slots=True)
class TestedBuild:
    """A build the adapter was tested against."""

    version: str
    layout: str
    published: str | None
    archives: tuple[Archive, ...]


def _archive(asset: dict[str, Any]) -> Archive | None:
    parsed = parse_name(asset["name"])
    if parsed is None:
        return None
    digest = asset.get("sha256")
    if digest is None and isinstance(asset.get("digest"), str) and asset["digest"].startswith("sha256:"):
        digest = asset["digest"][len("sha256:"):]
    return replace(parsed, size=asset.get("size"), sha256=digest)


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    """The recipe, validated against ``schemas/llamacpp-recipe.schema.json``.

    Raises:
        BadFile: the recipe is unreadable or does not match its schema.
    """
    return load_recipe(PACKAGE, SCHEMA)


def tested(recipe: dict[str, Any] | None = None) -> list[TestedBuild]:
    """The tested builds, newest first (re-sorted: the file's order is a convention)."""
    recipe = recipe if recipe is not None else load()
    out = []
    for entry in recipe["tested"]:
        archives = tuple(a for a in (_archive(x) for x in entry["assets"]) if a is not None)
        out.append(TestedBuild(entry["version"], entry["layout"], entry.get("published"), archives))
    return sorted(out, key=lambda b: version_key(b.version), reverse=True)


def find_tested(builds: Iterable[TestedBuild], version: str) -> TestedBuild | None:
    """The build ``version`` among ``builds`` (the tested ones), or None: it is not tested."""
    return next((b for b in builds if b.version == version), None)


def tested_record(recipe: Mapping[str, Any], version: str, name: str, key: str) -> Any:
    """What the recipe records under ``key`` (``needs``, ``kernels``) for archive ``name`` of the
    tested build ``version``, or None when it records nothing there."""
    for entry in recipe.get("tested", ()):
        if entry.get("version") != version:
            continue
        for asset in entry.get("assets", ()):
            if asset.get("name") == name and key in asset:
                return asset[key]
    return None


def listed(compat_part: Any) -> list[TestedBuild]:
    """The builds a compat document's ``runtimes.llamacpp.tested`` lists (``[{"build", "layout"}]``), in
    its order, with no archives known.

    Raises:
        BadFile: ``tested`` is not a list of ``{"build": "b<N>", "layout": str}``.
    """
    entries = compat_part.get("tested") if isinstance(compat_part, dict) else None
    if not isinstance(entries, list):
        raise BadFile("the compat document", "lists no tested llama.cpp builds", json_path="$.runtimes.llamacpp.tested")
    out = []
    for n, entry in enumerate(entries):
        build = entry.get("build") if isinstance(entry, dict) else None
        layout = entry.get("layout") if isinstance(entry, dict) else None
        if not isinstance(build, str) or not re.fullmatch(r"b\d+", build) or not isinstance(layout, str):
            raise BadFile("the compat document", "is not {\"build\": \"b<N>\", \"layout\": \"v<N>\"}",
                          json_path=f"$.runtimes.llamacpp.tested[{n}]")
        out.append(TestedBuild(build, layout, None, ()))
    return out


def tested_of(recipe: dict[str, Any], compat_part: Any) -> list[TestedBuild]:
    """The builds a compat document's ``runtimes.llamacpp.tested`` lists, newest first: the recipe's
    entry (its archives, pinned digests) where it has the build, else the build with no archives known
    (the release listing gives them).

    Raises:
        BadFile: as ``listed``.
    """
    ours = {b.version: b for b in tested(recipe)}
    out = [replace(ours[b.version], layout=b.layout) if b.version in ours else b for b in listed(compat_part)]
    return sorted(out, key=lambda b: version_key(b.version), reverse=True)
