"""Putting an install back exactly as its receipt records it (``runtime repair``).

See docs/install.md, "Verifying an install later".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import OfflineMissing
from superfluid.installer.home.fill import fetch
from superfluid.installer.home.publish import install_staged
from superfluid.installer.sources.mirror import asset_path, one_mirror, path_of_url, root_of_url, url_below
from superfluid.installer.transport.urls import path_of_file_url
from superfluid.installer.unpack.extract import extract_all
from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import LIB
from superfluid.runtime.kernel.receipt import RECEIPT
from superfluid.runtime.kernel.record import compare, files_of, record_tree
from superfluid.runtime.planning import Plan, PlanAsset, Sha256, is_local

if TYPE_CHECKING:
    from superfluid.installer.cache.download import Progress
    from superfluid.installer.home.fill import Verified
    from superfluid.installer.home.publish import Published
    from superfluid.installer.mutex import MutexOwner
    from superfluid.installer.settings import Settings
    from superfluid.runtime.kernel.receipt import Receipt

__all__ = ["NotRestorable", "unrestorable", "mirror_of", "plan_of", "restore"]


class NotRestorable(SuperfluidError):
    """An install cannot be put back from what its receipt records (exit 1)."""


def unrestorable(receipt: Receipt) -> str | None:
    """Why ``receipt`` does not say enough to put its install back by digest (None: it does): it
    records no files, no source, or a source without a SHA-256."""

    if files_of(receipt) is None:
        return "its receipt records no files"
    if not receipt.sources:
        return "its receipt records no source"
    missing = [s.url for s in receipt.sources if not s.sha256]
    return f"its receipt records no SHA-256 of {missing[0]}" if missing else None


def mirror_of(receipt: Receipt, *, github_web: str) -> str | None:
    """The mirror root an install came from, as its receipt records it (``"mirror"``), or None
    (GitHub's releases, ``--from``, or a mirror that is not a directory or an ``http(s)://`` URL: a
    registry's ``oci://``). A receipt written before it recorded the mirror says it by its sources:
    every source must then be a release download below one root
    (``<root>/<owner>/<repo>/releases/download/<tag>/<name>``) that is not ``github_web``, where
    GitHub's downloads live (``github.web_base_for`` of the API the home uses): a ``file://`` root
    is a directory mirror; an ``http(s)://`` one, a mirror's URL."""

    if receipt.chosen_by == "from" or not receipt.sources:
        return None
    recorded = receipt.extra.get("mirror")
    root = one_mirror([recorded] if isinstance(recorded, str) and recorded else
                      (root_of_url(source.url) for source in receipt.sources), github_web=github_web)
    if root is None:
        return None
    return root + "/" if root.split(":", 1)[0].lower() in ("file", "http", "https") else None


def _mirrored(url: str, mirror_root: str | None) -> str:
    """``url`` below ``mirror_root`` when it is a release download
    (``…/<owner>/<repo>/releases/download/<tag>/<name>``), else ``url``."""
    if mirror_root is None:
        return url

    placed = path_of_url(url)
    if placed is None:
        return url
    try:
        return url_below(mirror_root, asset_path(*placed))
    except ValueError:
        return url


def plan_of(receipt: Receipt, *, mirror_root: str | None = None) -> Plan:
    """The plan that fetches exactly the archives ``receipt`` names, each by its recorded digest."""

    assets = tuple(PlanAsset(name=s.url.rstrip("/").rsplit("/", 1)[-1], url=_mirrored(s.url, mirror_root),
                             sha256=Sha256(s.sha256), size=None, digest_source="pin", checked=("pin",))
                   for s in receipt.sources)
    return Plan(id=receipt.id, version=receipt.version, backend=receipt.backend, assets=assets, tested=receipt.tested,
                chosen_by=receipt.chosen_by or "from", abi=receipt.abi, why="as its receipt records it",
                platform=receipt.platforms[0] if receipt.platforms else "")


def _elsewhere(p: Plan, a: PlanAsset) -> str:
    """Where a repair whose local source is gone finds the bytes again, checked against the receipt's
    digest (advice: the folder or file is the user's to name): the folder a mirror moved to, named
    with ``--mirror`` (when it came from a mirror's layout: the same install is put back), else a copy
    of the file it was installed from (``--from``, with the recorded digest: never unchecked)."""
    if path_of_url(a.url) is None:  # a file of the user's own (--from): only a copy of it will do
        return (f"nothing was changed; an install of a copy of {a.name} with --from FILE --sha256 {a.sha256} "
                "--reinstall puts it in its place, checked")
    return ("nothing was changed; a repair with --mirror naming the folder the mirror moved to (or a mirror that "
            "holds the release) puts it back from there, checked against the receipt's digest")


def _fetch(p: Plan, *, settings: Settings, progress: Progress | None) -> list[Verified]:
    """Every archive of ``p`` verified on disk, in plan order: from the cache when it holds the
    digest (re-hashed), else from its source (a local file hashed in place; with ``settings.offline``,
    nothing remote).

    Raises:
        OfflineMissing: ``offline`` and the cache lacks a remote one (no connection opened).
        NotRestorable: a local file it was installed from is gone, and the cache lacks it.
        VerificationError, DownloadError: as ``fill.fetch``.
    """


    cache = Cache.for_home(settings.home)
    found: dict[int, Verified] = {}
    rest: list[tuple[int, PlanAsset]] = []
    for i, a in enumerate(p.assets):
        assert a.sha256 is not None  # plan_of: every source by its digest
        blob = cache.blobs.find_blob(a.sha256)
        if blob is not None:
            found[i] = (a, blob, a.sha256)
            continue
        if is_local(a.url):
            local = path_of_file_url(a.url) if a.url.startswith("file://") else a.url
            if not os.path.isfile(local):
                raise NotRestorable(f"{p.id} {p.install}: {local}, the file it was installed from, is gone (and the "
                                    "cache does not hold it)", advice=_elsewhere(p, a))
        elif settings.offline:
            raise OfflineMissing(f"archive {a.name} of {p.id} {p.install} (sha256 {a.sha256})", url=a.url,
                                 fix=Fix.superfluid("runtime", "repair", p.id, p.install,
                                                    does="fills the cache and puts it back"))
        rest.append((i, a))

    def unchecked(_path: str, _sha256: str) -> None:  # every source has its digest: never called
        raise AssertionError("a restored source without a digest")

    if rest:
        got = fetch(replace(p, assets=tuple(a for _, a in rest)), None, settings=settings, progress=progress,
                    unchecked=unchecked)
        found.update(zip((i for i, _ in rest), got, strict=True))
    return [found[i] for i in range(len(p.assets))]


def restore(receipt: Receipt, settings: Settings, *, mirror_root: str | None = None,
            progress: Progress | None = None, on_wait: Callable[[MutexOwner], None] | None = None,
            kept: Mapping[str, bytes] | None = None) -> Published:
    """Put the install ``receipt`` describes back as it records it (see the module doc). ``kept``: the
    files it keeps besides its archives', by their path below it (the Sigstore bundles that proved them,
    ``trust.proving.keep_again``), written as an install writes them; held to the receipt like the rest.

    Raises:
        NotRestorable: the receipt does not say enough (``unrestorable``), or the archives it names
            do not make the files it records (nothing is changed then).
        OfflineMissing, VerificationError, DownloadError: fetching (nothing is changed).
        UnsafeArchive, StoreError, MutexBusy: extraction and the store, as an install's.
    """

    why = unrestorable(receipt)
    if why is not None:
        raise NotRestorable(f"{receipt.id} {receipt.install}: {why}")
    recorded = [r for r in files_of(receipt) or () if r.path != receipt.worker]
    p = plan_of(receipt, mirror_root=mirror_root)
    fetched = _fetch(p, settings=settings, progress=progress)

    def stage(staging: Path) -> Receipt:
        for path, data in (kept or {}).items():
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            (staging / path).write_bytes(data)
        extract_all([path for _, path, _ in fetched], staging / LIB)
        found = [f for f in record_tree(staging, skip=(RECEIPT,)) if f.path != receipt.worker]
        differences = compare(recorded, found)
        if differences:
            raise NotRestorable(f"{receipt.id} {receipt.install}: the archives its receipt names do not make the "
                                f"files it records ({differences[0].describe()}); nothing was changed",
                                advice="its receipt does not describe its archives: remove it, then install it "
                                       "again")
        return receipt

    return install_staged(settings.home, receipt.id, receipt.install, stage, lambda _staging: None, on_wait=on_wait,
                          command=f"superfluid runtime repair {receipt.id} {receipt.install}")
