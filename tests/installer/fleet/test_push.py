"""``installer/oci_push``: the manifests a lock becomes (one per engine install, its files then its
repository's listing, annotated), and real pushes to a real registry on loopback: everything sent
once, nothing sent again, the registry's index and listing merged, a file of other bytes refused
before it is sent."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from superfluid.installer.errors import VerificationError
from superfluid.installer.fleet.lockfile import Lock
from superfluid.installer.fleet.push import engine_manifests, push
from superfluid.installer.fleet.sync import files_of
from superfluid.installer.sources.oci.ref import engine_tag, index_tag, parse_manifest, parse_ref
from tests.conftest import Home
from tests.fleet.registry import Registry
from tests.installer.conftest import LOCKED_REPO
from tests.settings_from import settings_from

LISTING = {LOCKED_REPO: b"[]\n"}


# --- the manifests (pure) --------------------------------------------------------------------------------

def test_one_manifest_per_engine_install_files_then_listing(file_lock: Lock) -> None:
    manifests = engine_manifests(file_lock, LISTING)
    assert list(manifests) == sorted([engine_tag("basert", "0.4.0", "linux-x64", "cpu"),
                                      engine_tag("basert", "0.4.0", "linux-x64", "cuda"),
                                      engine_tag("basert", "0.3.1", "linux-x64", "vulkan")])
    cpu = parse_manifest(manifests[engine_tag("basert", "0.4.0", "linux-x64", "cpu")], "m")
    assert [layer.title for layer in cpu] == [
        f"{LOCKED_REPO}/releases/download/v0.4.0/engine-cpu.tar.gz",
        f"{LOCKED_REPO}/releases/download/v0.4.0/basert-engine-abi-1.txt",  # its evidence
        f"{LOCKED_REPO}/releases.json"]  # the listing last
    doc = json.loads(manifests[engine_tag("basert", "0.4.0", "linux-x64", "cpu")])
    assert doc["annotations"]["superfluid.backend"] == "cpu" and doc["annotations"]["superfluid.repo"] == LOCKED_REPO


def test_two_kinds_of_machine_sharing_an_install_share_its_manifest(file_lock: Lock) -> None:
    cpu = next(e for e in file_lock.engines if e.backend == "cpu")
    twin = replace(cpu, target=replace(cpu.target, host="cuda"))  # a cuda box given cpu
    lock = replace(file_lock, engines=(cpu, twin))
    assert list(engine_manifests(lock, LISTING)) == [engine_tag("basert", "0.4.0", "linux-x64", "cpu")]


def test_the_manifests_are_stable(file_lock: Lock) -> None:
    assert engine_manifests(file_lock, LISTING) == engine_manifests(file_lock, LISTING)


# --- real pushes ------------------------------------------------------------------------------------------

def test_a_push_sends_everything_once(file_lock: Lock, registry: Registry, cli_home: Home) -> None:
    ref = parse_ref(registry.url)
    told: list[str] = []
    first = push(file_lock, ref, settings_from(cli_home.env), tell=told.append)
    assert len(first.sent) == 4 + 2 and first.present == ()  # four files, the listing, the empty config
    files = sum(f.size for _, _, f in files_of(file_lock))
    assert first.bytes_sent > files + 2  # the files, the empty config ({}) and a listing of them
    assert set(first.tags) | set(first.indexes) <= set(registry.tags())
    assert first.indexes == (index_tag(LOCKED_REPO),) and first.manifests_present == 0
    assert any(line.startswith("sending ") for line in told) and any(line.startswith("tagging ") for line in told)

    registry.clear_log()
    again = push(file_lock, ref, settings_from(cli_home.env))
    assert (again.sent, again.bytes_sent, again.manifests_sent) == ((), 0, 0)
    assert len(again.present) == 6 and again.manifests_present == len(first.tags) + 1
    assert [a for a in registry.log() if a.method in ("PUT", "POST", "PATCH")] == []  # nothing written


def test_a_file_whose_bytes_are_not_the_locked_ones_is_not_sent(file_lock: Lock, registry: Registry,
                                                               cli_home: Home) -> None:
    (_, _, cpu) = next(x for x in files_of(file_lock) if x[2].name == "engine-cpu.tar.gz")
    Path(cpu.url.removeprefix("file://")).write_bytes(b"cpu enginX")
    with pytest.raises(VerificationError):
        push(file_lock, parse_ref(registry.url), settings_from(cli_home.env))
    assert registry.tags() == []  # nothing tagged
    assert not registry.blob_file(cpu.sha256).exists()
