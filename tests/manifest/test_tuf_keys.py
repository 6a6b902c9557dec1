"""``manifest/tuf_keys``: a manifest repository's TUF key set, one ed25519 key per private file beside
a ``keys.json`` of the public keys and thresholds: made once (never over another), read back with a
signer for each private file present, and asked for the signers a step needs (refused, naming the
files, when too few are here)."""

from __future__ import annotations

import json
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.tuf_keys import KEYS_FILE, ROLES, KeySet, init_keys, read_keys
from superfluid.runtime.kernel.errors import BadFile, UsageError


@pytest.fixture(scope="module")
def key_set(tmp_path_factory: pytest.TempPathFactory) -> KeySet:
    """A key set of three root keys (threshold 2) and one key for each other role."""
    return init_keys(tmp_path_factory.mktemp("tuf") / "keys", root_keys=3, root_threshold=2)


def test_init_writes_one_private_file_per_key_and_keys_json(key_set: KeySet) -> None:
    files = sorted(p.name for p in key_set.where.iterdir())
    assert files == sorted([KEYS_FILE, "root-1.pem", "root-2.pem", "root-3.pem", "snapshot-1.pem", "targets-1.pem",
                            "timestamp-1.pem"])
    assert all(stat.S_IMODE((key_set.where / f).stat().st_mode) == 0o600 for f in files if f.endswith(".pem"))
    assert stat.S_IMODE(key_set.where.stat().st_mode) == 0o700
    doc = json.loads((key_set.where / KEYS_FILE).read_text())
    assert doc["kind"] == "superfluid-tuf-keys" and set(doc["roles"]) == set(ROLES)
    assert {role: doc["roles"][role]["threshold"] for role in ROLES} == {"root": 2, "timestamp": 1, "snapshot": 1,
                                                                         "targets": 1}
    assert "PRIVATE" not in (key_set.where / KEYS_FILE).read_text()


def test_the_set_read_back_has_every_key_and_a_signer_each(key_set: KeySet) -> None:
    again = read_keys(key_set.where)
    assert again.thresholds == key_set.thresholds
    for role in ROLES:
        assert again.keyids(role) == key_set.keyids(role)
        assert [s.public_key.keyid for s in again.signers[role]] == again.keyids(role)
    assert len(again.keyids("root")) == 3 and len(set(k for r in ROLES for k in again.keyids(r))) == 6


@pytest.mark.parametrize(("kwargs", "fragment"), [
    pytest.param({"root_keys": 0, "root_threshold": 0}, "the threshold must be between 1 and the number of root keys",
                 id="no-root-key"),
    pytest.param({"root_keys": 2, "root_threshold": 0}, "--root-threshold 0 of --root-keys 2", id="threshold-0"),
    pytest.param({"root_keys": 2, "root_threshold": 3}, "--root-threshold 3 of --root-keys 2", id="threshold-too-high"),
])
def test_init_refuses_a_threshold_it_cannot_meet(tmp_path: Path, kwargs: dict[str, int], fragment: str) -> None:
    with pytest.raises(UsageError, match=re.escape(fragment)):
        init_keys(tmp_path / "keys", **kwargs)
    assert not (tmp_path / "keys").exists()


def _a_key_set(where: Path) -> None:
    init_keys(where)


def _a_file(where: Path) -> None:
    where.write_text("not a folder\n")


def _a_stray_private_file(where: Path) -> None:
    where.mkdir()
    (where / "root-1.pem").write_text("someone's key\n")


@pytest.mark.parametrize(("make", "fragment"), [
    pytest.param(_a_key_set, "already holds a key set (keys.json): a key set is never overwritten", id="a-key-set"),
    pytest.param(_a_file, "is not a directory", id="a-file"),
    pytest.param(_a_stray_private_file, "root-1.pem exists: a key set is never overwritten", id="a-private-file"),
])
def test_init_never_writes_over_what_is_there(tmp_path: Path, make: Callable[[Path], None], fragment: str) -> None:
    where = tmp_path / "keys"
    make(where)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(UsageError, match=re.escape(fragment)):
        init_keys(where)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(where: Path) -> None:
        doc = json.loads((where / KEYS_FILE).read_text())
        change(doc)
        (where / KEYS_FILE).write_text(json.dumps(doc))

    return edit


def _swap_private_files(where: Path) -> None:
    (where / "targets-1.pem").write_bytes((where / "snapshot-1.pem").read_bytes())


@pytest.mark.parametrize(("damage", "error", "fragment"), [
    pytest.param(lambda where: (where / KEYS_FILE).unlink(), UsageError, "holds no keys.json", id="no-keys-json"),
    pytest.param(lambda where: (where / KEYS_FILE).write_text("{"), BadFile, "keys.json: cannot be read",
                 id="not-json"),
    pytest.param(_edit(lambda doc: doc.update(kind="other")), BadFile, "kind is not 'superfluid-tuf-keys'",
                 id="another-kind"),
    pytest.param(_edit(lambda doc: doc["roles"].pop("snapshot")), BadFile, "is not a superfluid-manifest key set",
                 id="a-role-missing"),
    pytest.param(_edit(lambda doc: doc["roles"]["targets"].update(threshold=2)), BadFile,
                 "targets's threshold 2 is not between 1 and its key count", id="threshold-above-the-keys"),
    pytest.param(_swap_private_files, BadFile, "targets-1.pem: is not the private key keys.json names",
                 id="another-private-key"),
    pytest.param(lambda where: (where / "root-1.pem").write_text("not PEM\n"), BadFile,
                 "root-1.pem: is not the private key keys.json names", id="not-pem"),
])
def test_a_broken_key_set_is_refused(key_set: KeySet, tmp_path: Path, damage: Callable[[Path], None], error: type,
                                     fragment: str) -> None:
    where = Path(shutil.copytree(key_set.where, tmp_path / "keys"))
    damage(where)
    with pytest.raises(error) as refused:
        read_keys(where)
    assert fragment in str(refused.value)


def test_a_private_file_kept_elsewhere_leaves_its_public_key(key_set: KeySet, tmp_path: Path) -> None:
    where = Path(shutil.copytree(key_set.where, tmp_path / "keys"))
    for n in (1, 2, 3):
        (where / f"root-{n}.pem").unlink()  # root keys belong offline between rotations
    online = read_keys(where)
    assert online.keyids("root") == key_set.keyids("root") and online.signers["root"] == []
    assert len(online.signers["timestamp"]) == 1


def test_need_answers_the_signers_to_the_threshold(key_set: KeySet) -> None:
    held = key_set.need("root", key_set.keyids("root"), 2, why="sign a root")
    assert [s.public_key.keyid for s in held] == key_set.keyids("root")


def test_need_refuses_fewer_than_the_threshold(key_set: KeySet, tmp_path: Path) -> None:
    where = Path(shutil.copytree(key_set.where, tmp_path / "keys"))
    for n in (2, 3):
        (where / f"root-{n}.pem").unlink()
    with pytest.raises(UsageError) as refused:
        read_keys(where).need("root", key_set.keyids("root"), 2, why="sign root version 2")
    assert str(refused.value).startswith(f"{where} holds 1 of the 2 root keys needed to sign root version 2")
    assert "bring the root-*.pem files back" in (refused.value.advice or "")


def test_need_refuses_keys_the_root_does_not_name(key_set: KeySet, tmp_path: Path) -> None:
    other = init_keys(tmp_path / "other")
    with pytest.raises(UsageError) as refused:
        other.need("targets", key_set.keyids("targets"), 1, why="sign the index")
    assert str(refused.value).startswith(f"the targets key in {other.where} is not the one needed to sign the "
                                         "index")
    assert "rotate-root --to" in (refused.value.advice or "")
