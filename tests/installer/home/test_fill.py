"""``installer.fill``: which plans stream and which are fetched first, a local ``--from`` file hashed
in place, and the fill that extracts verified files. A fake source records what it was asked to
fetch; nothing here opens a connection."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from superfluid.installer.cache.download import Download, Progress
from superfluid.installer.cache.stores import Cache
from superfluid.installer.errors import VerificationError
from superfluid.installer.home.fill import fetch, fill_for
from superfluid.installer.phases import Phases
from superfluid.installer.sources.release import Asset
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.planning import Plan, PlanAsset
from tests.installer.archives import E, make_tar
from tests.settings_from import settings_from

SHA = "a" * 64


class FakeSource:
    """Fetches from a dict of URL -> file; records every ``(url, sha256)`` asked for."""

    def __init__(self, cache: Cache, files: dict[str, Path] | None = None, *, offline: bool = False) -> None:
        self.cache = cache
        self.files = files or {}
        self.offline = offline
        self.fetcher = None
        self.asked: list[tuple[str, str | None]] = []

    def fetch_many(self, items: Sequence[tuple[Asset, str | None]], *,
                   progress: Progress | None = None) -> list[Download]:
        out = []
        for a, sha in items:
            self.asked.append((a.url, sha))
            path = self.files[a.url]
            out.append(Download(a.url, path, hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size,
                                cached=True))
        return out


def asset(name: str, url: str, sha256: str | None = SHA, size: int | None = 100) -> PlanAsset:
    return PlanAsset(name=name, url=url, sha256=sha256, size=size, digest_source="release")


def plan(*assets: PlanAsset) -> Plan:
    return Plan(id="demo", version="1.0", backend="cpu", assets=assets, tested=True, chosen_by="tested", abi=None,
                why="test")


def _no_unchecked(path: str, sha256: str) -> None:
    raise AssertionError(f"{path} was said to be unchecked")


# --- which plans stream --------------------------------------------------------------------------------

REMOTE = "http://mirror.test/v1/b.tar.gz"


@pytest.mark.parametrize(("assets", "offline", "cached", "streams"), [
    pytest.param([asset("b.tar.gz", REMOTE)], False, False, True, id="one-remote-tar"),
    pytest.param([asset("b.tar.xz", REMOTE)], False, False, True, id="any-tar-compression"),
    pytest.param([asset("b.tar.gz", REMOTE)], True, False, False, id="offline-source"),
    pytest.param([asset("b.tar.gz", REMOTE)], False, True, False, id="already-in-the-cache"),
    pytest.param([asset("b.zip", REMOTE)], False, False, False, id="a-zip"),
    pytest.param([asset("b.tar.gz", REMOTE, size=None)], False, False, False, id="size-unknown"),
    pytest.param([asset("b.tar.gz", REMOTE, sha256=None)], False, False, False, id="digest-unknown"),
    pytest.param([asset("b.tar.gz", REMOTE), asset("c.tar.gz", REMOTE + "2")], False, False, False, id="two-archives"),
])
def test_which_plans_stream(tmp_path: Path, assets: list[PlanAsset], offline: bool, cached: bool,
                            streams: bool) -> None:
    cache = Cache(tmp_path / "cache")
    if cached:
        cache.blobs.blob_path(SHA).parent.mkdir(parents=True, exist_ok=True)
        cache.blobs.blob_path(SHA).write_bytes(b"verified before")
    blob = tmp_path / "blob"
    blob.write_bytes(b"x")
    source = FakeSource(cache, {a.url: blob for a in assets}, offline=offline)
    phases = Phases()
    fill_for(plan(*assets), source, settings=settings_from({}), progress=None, phases=phases, unchecked=_no_unchecked)
    fetched_now = [name for name, _, _ in phases.spans()] == ["download"]
    assert fetched_now is not streams
    assert source.asked == ([] if streams else [(a.url, a.sha256) for a in assets])


# --- a local --from file -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("form", "digest", "error"), [
    pytest.param("path", "right", None, id="digest-matches"),
    pytest.param("file-url", "right", None, id="file-url"),
    pytest.param("path", None, None, id="no-digest-unchecked"),
    pytest.param("path", "wrong", VerificationError, id="digest-differs"),
    pytest.param("missing", "right", UsageError, id="no-such-file"),
])
def test_a_local_file_is_hashed_in_place(tmp_path: Path, form: str, digest: str | None,
                                         error: type[Exception] | None) -> None:
    path = tmp_path / "b.tar.gz"
    path.write_bytes(b"local bytes")
    right = hashlib.sha256(b"local bytes").hexdigest()
    url = {"path": str(path), "file-url": path.as_uri(), "missing": str(tmp_path / "gone.tar.gz")}[form]
    sha = {"right": right, "wrong": "0" * 64, None: None}[digest]
    told: list[tuple[str, str]] = []
    p = plan(asset("b.tar.gz", url, sha256=sha))
    if error is not None:
        with pytest.raises(error):
            fetch(p, None, settings=settings_from({}), progress=None, unchecked=lambda *t: told.append(t))
        assert told == []
        return
    ((a, got_path, got_sha),) = fetch(p, None, settings=settings_from({}), progress=None,
                                      unchecked=lambda *t: told.append(t))
    assert (a, got_path, got_sha) == (p.assets[0], path, right)
    assert told == ([] if sha else [(str(path), right)])


def test_fetched_in_plan_order(tmp_path: Path) -> None:
    local = tmp_path / "local.tar.gz"
    local.write_bytes(b"local")
    remote = tmp_path / "remote-blob"
    remote.write_bytes(b"remote")
    source = FakeSource(Cache(tmp_path / "cache"), {REMOTE: remote})
    p = plan(asset("b.tar.gz", REMOTE, sha256=hashlib.sha256(b"remote").hexdigest()),
             asset("local.tar.gz", str(local), sha256=hashlib.sha256(b"local").hexdigest()))
    got = fetch(p, source, settings=settings_from({}), progress=None, unchecked=_no_unchecked)  # type: ignore[arg-type]
    assert [(a.name, path) for a, path, _ in got] == [("b.tar.gz", remote), ("local.tar.gz", local)]
    assert source.asked == [(REMOTE, p.assets[0].sha256)]  # the local file never reaches the source


# --- the fill of verified files ----------------------------------------------------------------------------

def test_fetched_archives_are_extracted_when_staged(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "b.tar.gz", [E("file", "libengine.so", "engine")])
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    phases = Phases()
    fill = fill_for(plan(asset("b.tar.gz", str(archive), sha256=sha)), None, settings=settings_from({}), progress=None,
                    phases=phases, unchecked=_no_unchecked)
    assert [name for name, _, _ in phases.spans()] == ["download"]
    lib = tmp_path / "staging" / "lib"
    ((_, path, got),) = fill(lib)
    assert (path, got) == (archive, sha)
    assert (lib / "libengine.so").read_text() == "engine"
    assert [name for name, _, _ in phases.spans()] == ["download", "extract"]
