"""The release model every source yields (``Release``, ``Asset``) and the reading of a listing's JSON.

See docs/install.md, "Mirrors" (the listing file is shaped as GitHub's API answers).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from superfluid.runtime.kernel.errors import BadFile

__all__ = [
    "MAX_RELEASES",
    "Asset",
    "Release",
    "parse_asset",
    "parse_release",
    "parse_releases",
    "tagged",
]

log = logging.getLogger(__name__)

_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})")


@dataclass(frozen=True, slots=True)
class Asset:
    """One file of a release, as listed."""

    name: str
    url: str  # where its bytes are fetched (browser_download_url, or the mirror's path)
    size: int | None  # declared bytes
    digest: str | None = None  # "sha256:<hex>" as the listing states it, or None

    @property
    def sha256(self) -> str | None:
        """The listed SHA-256 hex (lower case), if the listing gives one."""
        m = _DIGEST.fullmatch(self.digest or "")
        return m.group(1).lower() if m else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "size": self.size, "digest": self.digest}


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """One published release (never a draft)."""

    tag: str  # "v0.4.0", "b11642"
    version: str  # the tag without a leading "v" before a digit: "0.4.0", "b11642"
    name: str
    draft: bool
    prerelease: bool
    published_at: str | None  # ISO 8601 as listed
    assets: tuple[Asset, ...] = field(default=())

    def asset(self, name: str) -> Asset | None:
        """The asset called ``name``, or ``None``."""
        return next((a for a in self.assets if a.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "version": self.version,
            "name": self.name,
            "draft": self.draft,
            "prerelease": self.prerelease,
            "published_at": self.published_at,
            "assets": [a.to_json() for a in self.assets],
        }


#: the most entries one listing (a page, or a mirror's whole releases.json) may hold: llama.cpp, the
#: engine with the most releases, has some thousands; a million entries is an attack, refused at once
MAX_RELEASES = 20_000
#: malformed releases named one by one; the rest are counted in one line
_MAX_SKIPS_TOLD = 20

_BAD_NAME = re.compile(r"[/\\\x00-\x1f\x7f]")


def _fault(where: str, json_path: str, fault: str) -> BadFile:
    return BadFile(where, fault, json_path=json_path, advice="the release listing is broken; try again or use --mirror")


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, path: str,
           *, required: bool = True) -> Any:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _fault(where, f"{path}.{key}", f"expected {want}, got {type(value).__name__}")
    return value


def _version_of(tag: str) -> str:
    return tag[1:] if len(tag) > 1 and tag[0] in "vV" and tag[1].isdigit() else tag


def _check_tag(tag: str, where: str, path: str) -> None:
    if not tag or tag.startswith("/") or "\\" in tag or re.search(r"[\x00-\x1f\x7f]", tag) or any(
        part in ("", ".", "..") for part in tag.split("/")
    ):
        raise _fault(where, f"{path}.tag_name", f"not a usable tag: {tag!r}")


def parse_asset(obj: Any, *, where: str, path: str, url_for: Callable[[str], str] | None = None) -> Asset:
    """One asset object (``name``, ``browser_download_url``, ``size``, ``digest``).

    ``url_for(name)`` replaces the listed URL (a mirror answers from its own paths).

    Raises:
        BadFile: a field of the wrong type, a name with a path separator, a malformed digest.
    """
    if not isinstance(obj, dict):
        raise _fault(where, path, f"expected an asset object, got {type(obj).__name__}")
    name = _field(obj, "name", str, where, path)
    if not name or name in (".", "..") or _BAD_NAME.search(name):
        raise _fault(where, f"{path}.name", f"not a usable file name: {name!r}")
    size = _field(obj, "size", int, where, path, required=False)
    if size is not None and size < 0:
        raise _fault(where, f"{path}.size", f"negative size {size}")
    digest = _field(obj, "digest", str, where, path, required=False)
    if digest is not None and digest.lower().startswith("sha256:") and not _DIGEST.fullmatch(digest):
        raise _fault(where, f"{path}.digest", f"malformed sha256 digest {digest!r}")
    if digest is not None and _DIGEST.fullmatch(digest):
        digest = "sha256:" + digest[len("sha256:"):].lower()
    if url_for is not None:
        url = url_for(name)
    else:
        url = _field(obj, "browser_download_url", str, where, path)
        if urlsplit(url).scheme not in ("https", "http"):
            raise _fault(where, f"{path}.browser_download_url", f"not an http(s) URL: {url!r}")
    return Asset(name=name, url=url, size=size, digest=digest)


def parse_release(
    obj: Any, *, where: str, path: str = "$", url_for: Callable[[str, str], str] | None = None
) -> Release:
    """One release object; ``url_for(tag, name)`` replaces asset URLs (a mirror).

    Raises:
        BadFile: a field of the wrong type, an unusable tag, a bad asset.
    """
    if not isinstance(obj, dict):
        raise _fault(where, path, f"expected a release object, got {type(obj).__name__}")
    tag = _field(obj, "tag_name", str, where, path)
    _check_tag(tag, where, path)
    draft = bool(_field(obj, "draft", bool, where, path, required=False))
    prerelease = bool(_field(obj, "prerelease", bool, where, path, required=False))
    name = _field(obj, "name", str, where, path, required=False) or tag
    published = _field(obj, "published_at", str, where, path, required=False)
    # absent: no assets (a hand-written mirror listing); present, it must be a list (`null` is not one)
    raw_assets = _field(obj, "assets", list, where, path) if "assets" in obj else []
    per_asset = (lambda n: url_for(tag, n)) if url_for is not None else None
    assets = tuple(
        parse_asset(a, where=where, path=f"{path}.assets[{i}]", url_for=per_asset) for i, a in enumerate(raw_assets)
    )
    return Release(tag=tag, version=_version_of(tag), name=name, draft=draft, prerelease=prerelease,
                   published_at=published, assets=assets)


def parse_releases(
    data: Any, *, where: str, url_for: Callable[[str, str], str] | None = None, offset: int = 0,
    warn: Callable[[str], None] | None = None,
) -> list[Release]:
    """A listing page (a JSON array of release objects), drafts skipped, in listed order.

    A malformed entry (a field of the wrong type, ``assets: null``, an unusable tag or asset) is
    skipped, never trusted in part, and ``warn`` is told which (its JSON path, its tag when it has
    one, and the fault); without ``warn`` it is logged. The other releases are still listed.

    Raises:
        BadFile: not an array, or more than ``MAX_RELEASES`` entries.
    """
    if not isinstance(data, list):
        raise _fault(where, "$", f"expected a JSON array of releases, got {type(data).__name__}")
    if len(data) > MAX_RELEASES:
        raise _fault(where, "$", f"lists {len(data)} releases, more than superfluid reads from one listing "
                                 f"({MAX_RELEASES}): not a release listing")
    releases = []
    skipped = 0
    for i, r in enumerate(data):
        path = f"$[{offset + i}]"
        try:
            releases.append(parse_release(r, where=where, path=path, url_for=url_for))
        except BadFile as e:
            skipped += 1
            if skipped > _MAX_SKIPS_TOLD:
                continue
            tag = r.get("tag_name") if isinstance(r, dict) else None
            named = f"release {tag!r} ({path})" if isinstance(tag, str) and tag else f"release {path}"
            message = f"{where}: {named} skipped: {e.json_path or path}: {e.fault}"
            (warn or log.warning)(message)
    if skipped > _MAX_SKIPS_TOLD:
        (warn or log.warning)(f"{where}: {skipped - _MAX_SKIPS_TOLD} more malformed releases skipped")
    return [r for r in releases if not r.draft]


def tagged(releases: Iterable[Release], tag: str) -> Release | None:
    """The release ``tag`` among ``releases`` (a listing), or None: how every lister finds one by tag."""
    return next((r for r in releases if r.tag == tag), None)
