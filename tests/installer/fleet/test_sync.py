"""``installer/mirror_sync``: a static mirror of what a lock names. The files once each by mirror
path, the listing merged with one already there (the lock's digest wins, newest first), then real
syncs from ``file://`` URLs through the home's cache: placed, left alone, replaced, refused before
any write; and ``verify``, which finds each way a mirror differs and changes nothing."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.fleet.lockfile import Lock, LockFileError
from superfluid.installer.fleet.sync import files_of, listing, sync, verify
from superfluid.runtime.kernel.errors import BadFile
from tests.conftest import Home
from tests.installer.archives import snapshot
from tests.settings_from import settings_from

REPO = "basecompute/baseRT"


# --- what a mirror holds (pure) ------------------------------------------------------------------------------

def test_files_of_names_each_path_once_in_path_order(file_lock: Lock) -> None:
    got = [(repo, tag, f.name) for repo, tag, f in files_of(file_lock)]
    assert got == [(REPO, "v0.3.1", "engine-vulkan.tar.gz"), (REPO, "v0.4.0", "basert-engine-abi-1.txt"),
                   (REPO, "v0.4.0", "engine-cpu.tar.gz"), (REPO, "v0.4.0", "engine-cuda.tar.gz")]


def _names(releases: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    return [(r["tag_name"], [a["name"] for a in r["assets"]]) for r in releases]


def test_a_fresh_listing_is_the_locks_releases_newest_first(file_lock: Lock) -> None:
    got = listing(file_lock, REPO)
    assert _names(got) == [("v0.4.0", ["basert-engine-abi-1.txt", "engine-cpu.tar.gz", "engine-cuda.tar.gz"]),
                           ("v0.3.1", ["engine-vulkan.tar.gz"])]
    cpu = next(a for a in got[0]["assets"] if a["name"] == "engine-cpu.tar.gz")
    assert cpu == {"name": "engine-cpu.tar.gz", "size": 10,
                   "digest": "sha256:" + hashlib.sha256(b"cpu engine").hexdigest()}
    assert (got[0]["draft"], got[0]["prerelease"]) == (False, False)


@pytest.mark.parametrize(("existing", "order"), [
    pytest.param([{"tag_name": "v0.10.0", "assets": []}], ["v0.10.0", "v0.4.0", "v0.3.1"], id="by-version-not-text"),
    pytest.param([{"tag_name": "v0.2.6", "assets": []}], ["v0.4.0", "v0.3.1", "v0.2.6"], id="older-kept-below"),
    pytest.param([{"name": "no tag"}, {"tag_name": 5}], ["v0.4.0", "v0.3.1"], id="untagged-entries-dropped"),
    pytest.param([{"tag_name": "v0.4.0", "assets": [], "body": "notes"}], ["v0.4.0", "v0.3.1"], id="same-tag-merged"),
])
def test_a_listing_already_there_is_merged(file_lock: Lock, existing: list[dict[str, Any]], order: list[str]) -> None:
    assert [r["tag_name"] for r in listing(file_lock, REPO, existing)] == order


def test_the_locks_digest_wins_and_other_files_stay(file_lock: Lock) -> None:
    existing = [{"tag_name": "v0.4.0", "body": "notes", "assets": [
        {"name": "engine-cpu.tar.gz", "size": 1, "digest": "sha256:" + "0" * 64},
        {"name": "README", "size": 3}]}]
    (rel, _) = listing(file_lock, REPO, existing)
    assert rel["body"] == "notes"  # the release's other fields are kept
    assets = {a["name"]: a for a in rel["assets"]}
    assert sorted(assets) == ["README", "basert-engine-abi-1.txt", "engine-cpu.tar.gz", "engine-cuda.tar.gz"]
    assert assets["engine-cpu.tar.gz"]["digest"] == "sha256:" + hashlib.sha256(b"cpu engine").hexdigest()
    assert assets["README"] == {"name": "README", "size": 3}


def test_a_listing_of_another_repository_holds_none_of_ours(file_lock: Lock) -> None:
    assert listing(file_lock, "ggml-org/llama.cpp") == []


# --- sync -------------------------------------------------------------------------------------------------------

def test_sync_places_every_file_and_the_listing(file_lock: Lock, cli_home: Home, tmp_path: Path) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    told: list[str] = []
    done = sync(file_lock, root, settings_from(env), tell=told.append)
    assert len(done.fetched) == 4 and done.present == () and done.replaced == ()
    assert done.listings == (f"{REPO}/releases.json",) and len(told) == 4
    for _, _, f in files_of(file_lock):
        assert hashlib.sha256((root / f.path).read_bytes()).hexdigest() == f.sha256
    assert json.loads((root / REPO / "releases.json").read_text()) == listing(file_lock, REPO)
    assert verify(file_lock, root, settings_from(env)) == (4, 0, [])


def test_a_second_sync_fetches_and_writes_nothing(file_lock: Lock, cli_home: Home, tmp_path: Path) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    sync(file_lock, root, settings_from(env))
    before = snapshot(root)
    again = sync(file_lock, root, settings_from(env))
    assert (again.fetched, again.replaced, again.listings) == ((), (), ())
    assert len(again.present) == 4 and snapshot(root) == before


def test_a_file_of_other_bytes_is_replaced(file_lock: Lock, cli_home: Home, tmp_path: Path) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    sync(file_lock, root, settings_from(env))
    (_, _, cpu) = next(x for x in files_of(file_lock) if x[2].name == "engine-cpu.tar.gz")
    (root / cpu.path).write_bytes(b"tampered!!")  # same size, other bytes
    done = sync(file_lock, root, settings_from(env))
    assert done.replaced == (cpu.path,) and done.fetched == (cpu.path,)
    assert (root / cpu.path).read_bytes() == b"cpu engine"


@pytest.mark.parametrize("text", [
    pytest.param("{not json", id="not-json"),
    pytest.param('{"tag_name": "v1"}', id="an-object"),
    pytest.param('[1, 2]', id="not-release-objects"),
])
def test_a_bad_listing_in_place_is_refused_before_any_write(file_lock: Lock, cli_home: Home, tmp_path: Path,
                                                             text: str) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    (root / REPO).mkdir(parents=True)
    (root / REPO / "releases.json").write_text(text)
    before = snapshot(root)
    with pytest.raises(BadFile) as e:
        sync(file_lock, root, settings_from(env))
    assert e.value.path == str(root / REPO / "releases.json")
    assert snapshot(root) == before


def test_a_link_out_of_the_mirror_is_refused(file_lock: Lock, cli_home: Home, tmp_path: Path) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    away = tmp_path / "away"
    away.mkdir()
    root.mkdir()
    os.symlink(away, root / "basecompute")
    with pytest.raises(LockFileError, match="leads out of the mirror"):
        sync(file_lock, root, settings_from(env))
    assert os.listdir(away) == []


def test_a_file_whose_bytes_differ_from_the_lock_is_not_placed(file_lock: Lock, cli_home: Home,
                                                               tmp_path: Path) -> None:
    env = cli_home.env
    from superfluid.installer.errors import VerificationError

    (_, _, cpu) = next(x for x in files_of(file_lock) if x[2].name == "engine-cpu.tar.gz")
    Path(cpu.url.removeprefix("file://")).write_bytes(b"cpu enginX")  # upstream changed under the lock
    root = tmp_path / "mirror"
    with pytest.raises(VerificationError):
        sync(file_lock, root, settings_from(env))
    assert not (root / cpu.path).exists() and not (root / REPO / "releases.json").exists()


# --- verify ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("spoil", "path", "fault", "good"), [
    pytest.param(lambda root, f: (root / f.path).unlink(), "FILE", "is missing", 3, id="missing"),
    pytest.param(lambda root, f: (root / f.path).write_bytes(b"tampered!!"), "FILE", "has SHA-256", 3,
                 id="other-bytes"),
    pytest.param(lambda root, f: (root / REPO / "releases.json").write_text("[]"), "FILE",
                 f"{REPO}/releases.json does not list it", 4, id="not-listed"),
    pytest.param(lambda root, f: (root / REPO / "releases.json").write_text("{"), f"{REPO}/releases.json",
                 "is not a readable JSON listing", 4, id="listing-unreadable"),
])
def test_verify_finds_each_difference_and_changes_nothing(file_lock: Lock, cli_home: Home, tmp_path: Path,
                                                         spoil: Any, path: str, fault: str, good: int) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    sync(file_lock, root, settings_from(env))
    (_, _, cpu) = next(x for x in files_of(file_lock) if x[2].name == "engine-cpu.tar.gz")
    spoil(root, cpu)
    before = snapshot(root)
    found, _, problems = verify(file_lock, root, settings_from(env))
    assert snapshot(root) == before
    want = cpu.path if path == "FILE" else path
    assert [p.path for p in problems if p.path == want and fault in p.fault], problems
    assert found == good


def test_verify_a_listing_that_states_another_digest(file_lock: Lock, cli_home: Home, tmp_path: Path) -> None:
    env = cli_home.env
    root = tmp_path / "mirror"
    sync(file_lock, root, settings_from(env))
    doc = json.loads((root / REPO / "releases.json").read_text())
    for rel in doc:
        for a in rel["assets"]:
            a["digest"] = "sha256:" + "0" * 64
    (root / REPO / "releases.json").write_text(json.dumps(doc))
    good, _, problems = verify(file_lock, root, settings_from(env))
    assert good == 4 and len(problems) == 4
    assert all(f"states sha256:{'0' * 64}" in p.fault for p in problems)
