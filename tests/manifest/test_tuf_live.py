"""``manifest/tuf_live``: the live service's TUF metadata. With online keys it signs each new index
(and again when targets or snapshot have lived half their life) and re-signs the timestamp when a
client asks for it past half its life; without keys it answers what an export left and says when
that lists other answers than the index gives. Only the four roles' files are answered. The clock is
the test's. (Over HTTP, against the real client: ``test_tuf_export.py``.)"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.answers import JSON
from superfluid.manifest.export import export_routes
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey
from superfluid.manifest.settings import read_settings
from superfluid.manifest.sources import DirectorySource
from superfluid.manifest.tuf_keys import KeySet, init_keys, read_keys
from superfluid.manifest.tuf_live import LiveRepository, live_from
from superfluid.manifest.tuf_repository import METADATA, Expiry, parse_expires
from superfluid.runtime.kernel.errors import UsageError
from tests.manifest.release_folders import vary, write_release

START = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
HOUR = 3600.0
SHORT = parse_expires(["targets=4h", "snapshot=4h", "timestamp=2h"])


class Clock:
    """Epoch seconds the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def live_keys(tmp_path_factory: pytest.TempPathFactory) -> KeySet:
    return init_keys(tmp_path_factory.mktemp("tuf") / "keys")


@pytest.fixture(scope="module")
def smaller(tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], key: SecretKey,
            trusted: list[TrustedKey]) -> Index:
    """An index of one release: other answers than the fleet's."""
    root = tmp_path_factory.mktemp("one")
    write_release(root, "a", vary(doc, "0.1.0"), key)
    return build_index(DirectorySource(root).snapshot(), trusted)


def _signed(repo: Path, role: str) -> dict[str, Any]:
    signed: dict[str, Any] = json.loads((repo / METADATA / f"{role}.json").read_bytes())["signed"]
    return signed


def _versions(repo: Path) -> dict[str, int]:
    return {role: int(_signed(repo, role)["version"]) for role in ("targets", "snapshot", "timestamp")}


def _published(tmp_path: Path, keys: KeySet, index: Index, clock: Clock) -> LiveRepository:
    live = LiveRepository(tmp_path / "repo", keys, SHORT, clock=clock)
    live.publish(index)
    return live


def test_publish_signs_every_answer_of_the_index(live_keys: KeySet, fleet: Index, tmp_path: Path) -> None:
    live = _published(tmp_path, live_keys, fleet, Clock())
    assert _versions(live.repo) == {"targets": 1, "snapshot": 1, "timestamp": 1}
    listed = set(_signed(live.repo, "targets")["targets"])
    assert listed == {r.path.lstrip("/") for r in export_routes(fleet)}
    assert listed == {p.relative_to(live.repo).as_posix() for p in live.repo.rglob("*")
                      if p.is_file() and not p.is_relative_to(live.repo / METADATA)}
    assert _signed(live.repo, "timestamp")["expires"] == "2026-01-01T02:00:00Z"


def test_the_same_index_is_not_signed_again_until_half_its_life(live_keys: KeySet, fleet: Index,
                                                                tmp_path: Path) -> None:
    clock = Clock()
    live = _published(tmp_path, live_keys, fleet, clock)
    clock.now += 1.9 * HOUR
    live.publish(fleet)
    assert _versions(live.repo) == {"targets": 1, "snapshot": 1, "timestamp": 1}
    clock.now += 0.2 * HOUR  # past 2 h of targets' and snapshot's 4
    live.publish(fleet)
    assert _versions(live.repo) == {"targets": 2, "snapshot": 2, "timestamp": 2}


def test_a_new_index_is_signed_at_once(live_keys: KeySet, fleet: Index, smaller: Index, tmp_path: Path) -> None:
    live = _published(tmp_path, live_keys, fleet, Clock())
    live.publish(smaller)
    assert _versions(live.repo)["targets"] == 2
    assert set(_signed(live.repo, "targets")["targets"]) == {r.path.lstrip("/") for r in export_routes(smaller)}


def test_the_timestamp_is_re_signed_when_asked_past_half_its_life(live_keys: KeySet, fleet: Index,
                                                                  tmp_path: Path) -> None:
    clock = Clock()
    live = _published(tmp_path, live_keys, fleet, clock)
    first, _, cache = live.answer("/metadata/timestamp.json")
    assert (first.status, first.content_type, cache) == (200, JSON, "no-cache")
    clock.now += 0.9 * HOUR
    assert live.answer("/metadata/timestamp.json")[0] == first  # an hour of two left: the same bytes
    clock.now += 0.2 * HOUR
    again = live.answer("/metadata/timestamp.json")[0]
    assert again.data != first.data and json.loads(again.data)["signed"]["version"] == 2
    assert _versions(live.repo) == {"targets": 1, "snapshot": 1, "timestamp": 2}
    assert live.answer("/metadata/snapshot.json")[0].data == (live.repo / METADATA / "snapshot.json").read_bytes()


@pytest.mark.parametrize(("path", "fragment"), [
    pytest.param("/metadata/other.json", "no metadata 'other.json'", id="not-a-role"),
    pytest.param("/metadata/../keys.json", "no metadata '../keys.json'", id="a-path-up"),
    pytest.param("/metadata/01.root.json", "no metadata '01.root.json'", id="a-root-misspelled"),
    pytest.param("/metadata/2.root.json", "no metadata 2.root.json", id="a-root-not-there"),
])
def test_only_the_roles_files_are_answered(live_keys: KeySet, fleet: Index, tmp_path: Path, path: str,
                                           fragment: str) -> None:
    live = _published(tmp_path, live_keys, fleet, Clock())
    body, etag, cache = live.answer(path)
    assert (body.status, etag, cache) == (404, None, "no-cache")
    assert json.loads(body.data)["error"] == fragment and json.loads(body.data)["parameter"] == "path"


def test_without_keys_the_export_is_answered_as_left(live_keys: KeySet, fleet: Index, smaller: Index, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    signed = _published(tmp_path, live_keys, fleet, clock)
    before = {p: p.read_bytes() for p in signed.repo.rglob("*") if p.is_file()}
    live = LiveRepository(signed.repo, None, SHORT, clock=clock)
    clock.now += 10 * HOUR  # long past every expiry: nothing here can sign
    with caplog.at_level(logging.WARNING, logger="superfluid.manifest"):
        live.publish(fleet)
        assert caplog.records == []
        live.publish(smaller)
    assert "lists other answers than this index gives" in caplog.text
    assert live.answer("/metadata/timestamp.json")[0].data == before[signed.repo / METADATA / "timestamp.json"]
    assert {p: p.read_bytes() for p in signed.repo.rglob("*") if p.is_file()} == before


def test_a_timestamp_that_cannot_be_re_signed_is_answered_as_it_is(live_keys: KeySet, fleet: Index, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    signed = _published(tmp_path, live_keys, fleet, clock)
    stranger = LiveRepository(signed.repo, init_keys(tmp_path / "stranger"), SHORT, clock=clock)
    clock.now += 1.5 * HOUR
    with caplog.at_level(logging.WARNING, logger="superfluid.manifest"):
        body = stranger.answer("/metadata/timestamp.json")[0]
    assert body.status == 200 and json.loads(body.data)["signed"]["version"] == 1
    assert "the timestamp could not be re-signed" in caplog.text


def _without(role: str) -> Callable[[KeySet, Path], LiveRepository]:
    def make(keys: KeySet, tmp_path: Path) -> LiveRepository:
        where = Path(shutil.copytree(keys.where, tmp_path / "keys"))
        (where / f"{role}-1.pem").unlink()
        return LiveRepository(tmp_path / "repo", read_keys(where))

    return make


@pytest.mark.parametrize(("make", "fragment"), [
    pytest.param(_without("timestamp"), "holds no timestamp key: the service signs each new index",
                 id="keys-without-the-timestamp-key"),
    pytest.param(_without("targets"), "holds no targets key", id="keys-without-the-targets-key"),
    pytest.param(lambda keys, tmp_path: LiveRepository(tmp_path / "repo", None),
                 "holds no metadata/timestamp.json, and the service holds no key to sign one", id="nothing-to-answer"),
])
def test_a_repository_that_could_not_answer_is_refused(live_keys: KeySet, tmp_path: Path,
                                                       make: Callable[[KeySet, Path], LiveRepository],
                                                       fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        make(live_keys, tmp_path)


def test_a_repository_with_only_its_root_keys_offline(live_keys: KeySet, tmp_path: Path) -> None:
    where = Path(shutil.copytree(live_keys.where, tmp_path / "keys"))
    (where / "root-1.pem").unlink()
    assert LiveRepository(tmp_path / "repo", read_keys(where)).keys is not None


# -- from the flags or the environment ----------------------------------------------------------------


def test_no_repository_named_is_none() -> None:
    assert live_from(read_settings({})) is None
    assert live_from(read_settings({"SUPERFLUID_MANIFEST_EXPIRES": "timestamp=2s"})) is None


@pytest.mark.parametrize(("environ", "flags"), [
    pytest.param({"SUPERFLUID_MANIFEST_TUF_KEYS": "{keys}"}, {}, id="keys-from-the-environment"),
    pytest.param({}, {"keys": "{keys}"}, id="keys-from-the-flag"),
])
def test_keys_without_a_repository_are_refused(live_keys: KeySet, environ: dict[str, str],
                                               flags: dict[str, str]) -> None:
    fill = {"keys": str(live_keys.where)}
    with pytest.raises(UsageError, match="--tuf-keys needs --tuf-repo DIR"):
        live_from(read_settings({k: v.format(**fill) for k, v in environ.items()}),
                  **{k: v.format(**fill) for k, v in flags.items()})


def test_the_environment_names_repository_keys_and_expiry(live_keys: KeySet, tmp_path: Path) -> None:
    live = live_from(read_settings({"SUPERFLUID_MANIFEST_TUF_REPO": f" {tmp_path / 'repo'} ",
                                    "SUPERFLUID_MANIFEST_TUF_KEYS": str(live_keys.where),
                                    "SUPERFLUID_MANIFEST_EXPIRES": "timestamp=2s,, snapshot=3h"}))
    assert live is not None and live.repo == (tmp_path / "repo").resolve()
    assert live.keys is not None and live.keys.keyids("timestamp") == live_keys.keyids("timestamp")
    assert live.expiry == parse_expires(["timestamp=2s", "snapshot=3h"])


def test_flags_come_before_the_environment(live_keys: KeySet, tmp_path: Path) -> None:
    environ = {"SUPERFLUID_MANIFEST_TUF_REPO": str(tmp_path / "elsewhere"),
               "SUPERFLUID_MANIFEST_EXPIRES": "timestamp=2s"}
    live = live_from(read_settings(environ), repo=str(tmp_path / "repo"), keys=str(live_keys.where), expires=[])
    assert live is not None and live.repo == (tmp_path / "repo").resolve() and live.expiry == Expiry()


def test_a_bad_expiry_in_the_environment_is_a_usage_error(live_keys: KeySet, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--expires 'timestamp=soon'"):
        live_from(read_settings({"SUPERFLUID_MANIFEST_TUF_REPO": str(tmp_path / "repo"),
                                 "SUPERFLUID_MANIFEST_TUF_KEYS": str(live_keys.where),
                                 "SUPERFLUID_MANIFEST_EXPIRES": "timestamp=soon"}))
