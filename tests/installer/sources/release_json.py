"""GitHub's release JSON as the API answers it, built for the tests of the release model and the client."""

from __future__ import annotations

from typing import Any

from tests.installer.conftest import REPO

__all__ = ["HEX", "release_json", "asset_json"]

HEX = "ab" * 32


def release_json(tag: str, **kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"tag_name": tag, "name": f"baseRT {tag}", "draft": False, "prerelease": False,
                           "published_at": "2026-01-01T00:00:00Z", "assets": []}
    obj.update(kw)
    return obj


def asset_json(name: str, **kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"name": name, "size": 10, "digest": f"sha256:{HEX}",
                           "browser_download_url": f"https://github.com/{REPO}/releases/download/v1/{name}"}
    obj.update(kw)
    return obj
