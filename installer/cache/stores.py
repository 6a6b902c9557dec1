"""The download cache under ``$SUPERFLUID_HOME/cache``: its three stores (blobs, partials, HTTP index) on one root.

See docs/install.md, "The cache".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from superfluid.installer.cache.blobs import BlobStore
from superfluid.installer.cache.http_index import HttpIndex
from superfluid.installer.cache.partials import PartialStore
from superfluid.runtime.kernel.layout import cache_dir

__all__ = ["Cache"]


@dataclass(frozen=True, slots=True)
class Cache:
    """The download cache rooted at ``root``: ``blobs`` by content, ``partials`` in progress, and ``http``,
    what URLs answered.

    Args:
        root: the cache directory, normally ``$SUPERFLUID_HOME/cache`` (see ``for_home``).
    """

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    @property
    def blobs(self) -> BlobStore:
        return BlobStore(self.root)

    @property
    def partials(self) -> PartialStore:
        return PartialStore(self.root)

    @property
    def http(self) -> HttpIndex:
        return HttpIndex(self.root, self.blobs)

    @classmethod
    def for_home(cls, home: str | os.PathLike[str]) -> Cache:
        """The cache of a ``SUPERFLUID_HOME``."""
        return cls(cache_dir(home))
