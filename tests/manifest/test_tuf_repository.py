"""``manifest/tuf_repository``: the static export as a TUF repository. ``--expires`` durations; the
first export signs root version 1 and the chain targets -> snapshot -> timestamp, each naming the
version and digest of the one below; later exports go on one version up under the same root;
``refresh_timestamp`` re-signs the timestamp alone; ``rotate_root`` signs root N+1 with root N's
keys and its own. Signatures are checked with python-tuf itself. (The whole cycle against the real
client is ``test_tuf_export.py``.)"""

from __future__ import annotations

import hashlib
import re
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from tuf.api.metadata import Metadata, Root

from superfluid.manifest.tuf_keys import KeySet, init_keys, read_keys
from superfluid.manifest.tuf_repository import (
    MAX_VALIDITY,
    METADATA,
    Expiry,
    latest_root,
    now_utc,
    parse_expires,
    refresh_timestamp,
    rotate_root,
    sign_export,
    target_files,
)
from superfluid.runtime.kernel.errors import BadFile, UsageError

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
CHAIN = ["1.root.json", "targets.json", "snapshot.json", "timestamp.json"]


@pytest.fixture(scope="module")
def tuf_keys(tmp_path_factory: pytest.TempPathFactory) -> KeySet:
    return init_keys(tmp_path_factory.mktemp("tuf") / "keys")


def _stage(where: Path, answer: bytes = b'{"releases": []}\n') -> Path:
    """A staged export: two answers, and metadata an earlier signing left (never a target)."""
    (where / "v1").mkdir(parents=True)
    (where / "v1" / "releases.json").write_bytes(answer)
    (where / "index.html").write_bytes(b"<!doctype html>\n")
    return where


def _md(metadata: Path, name: str) -> Metadata[Any]:
    return Metadata.from_bytes((metadata / name).read_bytes())


def _verified(metadata: Path, root_name: str = "1.root.json") -> dict[str, Metadata[Any]]:
    """Every role's metadata in ``metadata``, each checked against the root named: signed to its
    threshold, and naming the version and digest of the one below."""
    root = _md(metadata, root_name)
    root.signed.verify_delegate("root", root.signed_bytes, root.signatures)
    roles = {role: _md(metadata, f"{role}.json") for role in ("targets", "snapshot", "timestamp")}
    for role, md in roles.items():
        root.signed.verify_delegate(role, md.signed_bytes, md.signatures)
    snapshot_bytes, targets_bytes = (metadata / "snapshot.json").read_bytes(), (metadata / "targets.json").read_bytes()
    named = roles["timestamp"].signed.snapshot_meta
    assert named.version == roles["snapshot"].signed.version
    assert named.hashes == {"sha256": hashlib.sha256(snapshot_bytes).hexdigest()}
    listed = roles["snapshot"].signed.meta["targets.json"]
    assert listed.version == roles["targets"].signed.version
    assert listed.hashes == {"sha256": hashlib.sha256(targets_bytes).hexdigest()}
    return {"root": root, **roles}


# -- --expires ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "expected"), [
    pytest.param([], Expiry(timedelta(days=365), timedelta(days=90), timedelta(days=90), timedelta(days=1)),
                 id="defaults"),
    pytest.param(["timestamp=2s"], Expiry(timestamp=timedelta(seconds=2)), id="seconds"),
    pytest.param(["root=4w", "snapshot=30m"], Expiry(root=timedelta(weeks=4), snapshot=timedelta(minutes=30)),
                 id="two-roles"),
    pytest.param([" targets = 12h "], Expiry(targets=timedelta(hours=12)), id="spaces"),
    pytest.param(["timestamp=1d", "timestamp=7d"], Expiry(timestamp=timedelta(days=7)), id="the-last-wins"),
])
def test_parse_expires(values: list[str], expected: Expiry) -> None:
    assert parse_expires(values) == expected


@pytest.mark.parametrize("value", ["timestamp=2", "timestamp", "=1d", "mirror=1d", "timestamp=1y",
                                   "timestamp=-1d", "timestamp=1.5h", "Timestamp=1d"],
                         ids=["no-unit", "no-duration", "no-role", "no-such-role", "unknown-unit", "negative",
                              "fraction", "capitals"])
def test_parse_expires_refuses(value: str) -> None:
    with pytest.raises(UsageError, match=re.escape(f"--expires {value!r}: give ROLE=DURATION")):
        parse_expires([value])


@pytest.mark.parametrize(("value", "said"), [
    ("timestamp=0s", "a duration of zero is not allowed: metadata valid for no time is expired when signed; give "
                     "at least 1s, e.g. timestamp=1s"),
    ("root=000d", "a duration of zero is not allowed"),
    ("timestamp=99999999w", "a duration of at most 36500d (100 years) is allowed"),
    ("root=36501d", "a duration of at most 36500d (100 years) is allowed"),
    ("root=" + "9" * 5000 + "s", "a duration of at most 36500d"),
], ids=["zero", "zeros", "huge", "one-day-too-long", "digits-without-end"])
def test_parse_expires_says_zero_and_too_long_as_such(value: str, said: str) -> None:
    """Issue 35, items 3 and 15: a date out of range was an OverflowError, zero was "not a whole number"."""
    with pytest.raises(UsageError, match=re.escape(f"--expires {value!r}: {said}")):
        parse_expires([value])


def test_the_longest_validity_is_a_date_a_signature_can_state() -> None:
    expiry = parse_expires(["root=36500d"])
    assert expiry.root == MAX_VALIDITY
    assert now_utc() + expiry.root > now_utc()


def test_each_role_has_its_expiry() -> None:
    expiry = parse_expires(["snapshot=3h"])
    assert [expiry.of(role) for role in ("root", "targets", "snapshot", "timestamp")] == [
        timedelta(days=365), timedelta(days=90), timedelta(hours=3), timedelta(days=1)]


# -- signing an export -------------------------------------------------------------------------------


def test_the_first_export_signs_root_1_and_the_chain(tuf_keys: KeySet, tmp_path: Path) -> None:
    stage = _stage(tmp_path / "stage")
    written = sign_export(stage, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    assert [p.name for p in written][-2:] == ["snapshot.json", "timestamp.json"]  # the timestamp last
    assert sorted(p.name for p in written) == sorted(CHAIN) and all(p.parent == Path(METADATA) for p in written)
    roles = _verified(stage / METADATA)
    assert {role: md.signed.version for role, md in roles.items()} == {"root": 1, "targets": 1, "snapshot": 1,
                                                                       "timestamp": 1}
    assert roles["root"].signed.expires == NOW + timedelta(days=365)
    assert roles["timestamp"].signed.expires == NOW + timedelta(days=1)
    targets = roles["targets"].signed.targets
    assert sorted(targets) == ["index.html", "v1/releases.json"]
    assert targets["v1/releases.json"].length == len(b'{"releases": []}\n')


def test_a_later_export_goes_on_one_version_up(tuf_keys: KeySet, tmp_path: Path) -> None:
    first = _stage(tmp_path / "first")
    sign_export(first, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    second = _stage(tmp_path / "second", b'{"releases": ["0.1.0"]}\n')
    sign_export(second, first, tuf_keys, Expiry(), now=NOW + timedelta(hours=1))
    roles = _verified(second / METADATA)
    assert [roles[r].signed.version for r in ("root", "targets", "snapshot", "timestamp")] == [1, 2, 2, 2]
    assert (second / METADATA / "1.root.json").read_bytes() == (first / METADATA / "1.root.json").read_bytes()
    assert roles["targets"].signed.targets["v1/releases.json"].length == len(b'{"releases": ["0.1.0"]}\n')


def test_an_expired_root_is_not_signed_under(tuf_keys: KeySet, tmp_path: Path) -> None:
    first = _stage(tmp_path / "first")
    sign_export(first, tmp_path / "none", tuf_keys, parse_expires(["root=1d"]), now=NOW)
    second = _stage(tmp_path / "second")
    with pytest.raises(UsageError, match="1.root.json expired at 2026-01-02T00:00:00Z: every client refuses it"):
        sign_export(second, first, tuf_keys, Expiry(), now=NOW + timedelta(days=2))
    assert not (second / METADATA).exists()


def test_keys_the_root_does_not_trust_sign_nothing(tuf_keys: KeySet, tmp_path: Path) -> None:
    first = _stage(tmp_path / "first")
    sign_export(first, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    second = _stage(tmp_path / "second")
    with pytest.raises(UsageError, match="is not the one needed to sign the index"):
        sign_export(second, first, init_keys(tmp_path / "other"), Expiry(), now=NOW)
    assert not (second / METADATA).exists()


def test_target_files_are_the_tree_but_its_metadata(tmp_path: Path) -> None:
    stage = _stage(tmp_path / "stage")
    (stage / METADATA).mkdir()
    (stage / METADATA / "timestamp.json").write_text("{}")
    (stage / "metadata.json").write_text("an answer\n")  # only the folder is metadata
    assert target_files(stage) == {"index.html": b"<!doctype html>\n", "metadata.json": b"an answer\n",
                                   "v1/releases.json": b'{"releases": []}\n'}


# -- the root on disk --------------------------------------------------------------------------------


def test_latest_root_is_the_newest(tuf_keys: KeySet, tmp_path: Path) -> None:
    assert latest_root(tmp_path / "none") is None
    stage = _stage(tmp_path / "stage")
    sign_export(stage, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    found = latest_root(stage / METADATA)
    assert found is not None and found[0] == 1 and isinstance(found[1].signed, Root)
    (stage / METADATA / "01.root.json").write_text("not a root file name\n")
    assert latest_root(stage / METADATA) is not None


@pytest.mark.parametrize(("name", "data", "fragment"), [
    pytest.param("2.root.json", None, "is not root metadata of version 2", id="version-1-named-2"),
    pytest.param("2.root.json", b"{}", "is not TUF metadata", id="not-metadata"),
    pytest.param("3.root.json", b"\xff", "is not TUF metadata", id="not-json"),
])
def test_a_root_that_is_not_what_its_name_says(tuf_keys: KeySet, tmp_path: Path, name: str, data: bytes | None,
                                               fragment: str) -> None:
    stage = _stage(tmp_path / "stage")
    sign_export(stage, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    metadata = stage / METADATA
    if data is None:
        shutil.copy(metadata / "1.root.json", metadata / name)
    else:
        (metadata / name).write_bytes(data)
    with pytest.raises(BadFile, match=fragment):
        latest_root(metadata)


# -- the timestamp alone, and a new root ---------------------------------------------------------------


def test_refresh_timestamp_re_signs_the_timestamp_alone(tuf_keys: KeySet, tmp_path: Path) -> None:
    out = _stage(tmp_path / "site")
    sign_export(out, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    others = {n: (out / METADATA / n).read_bytes() for n in CHAIN[:-1]}
    later = NOW + timedelta(hours=20)
    assert refresh_timestamp(out, tuf_keys, parse_expires(["timestamp=2h"]), now=later) == 2
    roles = _verified(out / METADATA)
    assert roles["timestamp"].signed.version == 2 and roles["timestamp"].signed.expires == later + timedelta(hours=2)
    assert {n: (out / METADATA / n).read_bytes() for n in CHAIN[:-1]} == others


def test_refresh_timestamp_with_the_timestamp_key_alone(tuf_keys: KeySet, tmp_path: Path) -> None:
    out = _stage(tmp_path / "site")
    sign_export(out, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    cron = tmp_path / "cron"
    shutil.copytree(tuf_keys.where, cron)
    for role in ("root", "targets", "snapshot"):
        (cron / f"{role}-1.pem").unlink()
    assert refresh_timestamp(out, read_keys(cron), Expiry(), now=NOW) == 2


def test_refresh_needs_an_export_with_metadata(tuf_keys: KeySet, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="holds no TUF metadata"):
        refresh_timestamp(_stage(tmp_path / "site"), tuf_keys, Expiry(), now=NOW)


def test_rotate_root_signs_the_next_root_with_both_key_sets(tuf_keys: KeySet, tmp_path: Path) -> None:
    out = _stage(tmp_path / "site")
    sign_export(out, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    new = init_keys(tmp_path / "new", root_keys=2, root_threshold=2)
    assert rotate_root(out, tuf_keys, new, Expiry(), now=NOW) == 2
    metadata = out / METADATA
    root1, root2 = _md(metadata, "1.root.json"), _md(metadata, "2.root.json")
    root1.signed.verify_delegate("root", root2.signed_bytes, root2.signatures)  # what a client at root 1 checks
    roles = _verified(metadata, "2.root.json")
    assert [roles[r].signed.version for r in ("root", "targets", "snapshot", "timestamp")] == [2, 2, 2, 2]
    assert set(roles["root"].signed.roles["targets"].keyids) == set(new.keyids("targets"))
    assert roles["targets"].signed.targets.keys() == _md(metadata, "targets.json").signed.targets.keys()


def test_rotate_root_needs_the_old_roots_threshold(tuf_keys: KeySet, tmp_path: Path) -> None:
    out = _stage(tmp_path / "site")
    sign_export(out, tmp_path / "none", tuf_keys, Expiry(), now=NOW)
    stranger = init_keys(tmp_path / "stranger")
    before = sorted(p.name for p in (out / METADATA).iterdir())
    with pytest.raises(UsageError, match="is not the one needed to sign root version 2 for root version 1"):
        rotate_root(out, stranger, stranger, Expiry(), now=NOW)
    assert sorted(p.name for p in (out / METADATA).iterdir()) == before
