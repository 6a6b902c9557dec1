"""Every attack TUF's freshness layer stops, one test each, against the repository simulator on loopback
(issue 21, item 4): the client (``installer.manifest_trust.fetch_answer``, the one call ``compat
--service`` and ``--for VERSION`` make) asks, the simulator is changed the way an attacker or a broken
mirror would, and the client asks again. Each test asserts the typed refusal and the attack its
words name, what the trust folder still holds, that nothing was written outside it, and, through
the simulator's record, what was fetched."""

from __future__ import annotations

import datetime
import json
import os
import time
from pathlib import Path
from unittest.mock import patch
from urllib.parse import quote

import pytest
from securesystemslib.signer import CryptoSigner

from superfluid.installer.trust.manifest import Trust, fetch_answer, trust_dir
from superfluid.installer.trust.refusals import (
    AnswerMismatch,
    EndlessData,
    FreezeRefused,
    MixAndMatch,
    NoFreshness,
    NotListed,
    NoTrustRoot,
    RollbackRefused,
    UntrustedSigner,
)
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.conftest import ANSWER, FIRST
from tests.tuf_simulator import TufSimulator


class Client:
    """A home and the root it was given once."""

    def __init__(self, tmp: Path, sim: TufSimulator) -> None:
        self.home = tmp / "home"
        self.sim = sim
        self.root = tmp / "1.root.json"
        self.root.write_bytes(sim.signed_roots[0])

    def ask(self, path: str = ANSWER, *, root: bool = True) -> bytes:
        trust = Trust(str(self.home), str(self.root) if root else None)
        return fetch_answer(self.sim.url, path, trust, max_bytes=1 << 20).body

    @property
    def folder(self) -> Path:
        return Path(trust_dir(str(self.home), self.sim.url))

    def version(self, role: str) -> int:
        return int(json.loads((self.folder / f"{role}.json").read_bytes())["signed"]["version"])

    def disk(self) -> dict[str, bytes]:
        """Everything under the home, by path (the trust folder's lock aside)."""
        return {p.relative_to(self.home).as_posix(): p.read_bytes() for p in sorted(self.home.rglob("*"))
                if p.is_file() and not p.is_symlink() and p.name != ".lock"}

    def only_trust_folder(self) -> None:
        top = {p.relative_to(self.home).parts[0] for p in self.home.rglob("*")}
        assert top == {"trust"}, top
        assert [p.name for p in (self.home / "trust").iterdir()] == [self.folder.name]


@pytest.fixture
def client(tmp_path: Path, sim: TufSimulator) -> Client:
    c = Client(tmp_path, sim)
    assert c.ask() == FIRST  # seen once: the trust folder holds the index of that run
    return c


def test_a_fresh_answer_is_answered_and_kept_in_the_trust_folder(client: Client, sim: TufSimulator) -> None:
    sim.fetched.clear()
    assert client.ask(root=False) == FIRST  # the root given once is kept: no --trust-root the next time
    assert sim.fetched == ["/metadata/2.root.json", "/metadata/timestamp.json"]  # nothing else changed
    client.only_trust_folder()
    assert (client.folder / "root_history" / "1.root.json").read_bytes() == sim.signed_roots[0]


def test_freeze_with_the_clock_moved_forward(client: Client, sim: TufSimulator) -> None:
    before = client.disk()
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=31)
    with patch.object(datetime, "datetime", wraps=datetime.datetime) as clock:  # as python-tuf's tests move it
        clock.now.return_value = later
        with pytest.raises(FreezeRefused, match=r"timestamp expired at .*an indefinite freeze\), refused"):
            client.ask()
    assert client.disk() == before


def test_freeze_an_expired_timestamp_signed_anew_is_still_expired(client: Client, sim: TufSimulator) -> None:
    seen = client.version("timestamp")
    sim.timestamp.expires = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) \
        - datetime.timedelta(seconds=1)
    sim.update_timestamp()
    with pytest.raises(FreezeRefused, match="timestamp expired at"):
        client.ask()
    assert client.version("timestamp") == seen


@pytest.mark.parametrize("role", ["timestamp", "snapshot", "targets"])
def test_rollback_of_each_role_is_refused_across_runs(client: Client, sim: TufSimulator, role: str) -> None:
    sim.publish({ANSWER: b'{"version": "0.2.0", "withdrawn": true}\n'})
    client.ask()  # this run saw the newer index
    seen = {r: client.version(r) for r in ("timestamp", "snapshot", "targets")}
    if role == "timestamp":  # an older timestamp replayed, validly signed
        sim.replay["timestamp"] = seen["timestamp"] - 1
        match = rf"index version {seen['timestamp'] - 1} \(timestamp\) is older"
    elif role == "snapshot":  # a new timestamp naming an older snapshot
        sim.timestamp.version += 1
        sim.timestamp.snapshot_meta.version -= 1
        sim.history["timestamp"][sim.timestamp.version] = sim.signed("timestamp")
        match = rf"index version {seen['snapshot'] - 1} \(snapshot, as timestamp version \d+ names it\) is older"
    else:  # a new snapshot (and timestamp) naming older targets
        sim.snapshot.meta["targets.json"].version -= 1
        sim.snapshot.meta["targets.json"].length = None
        sim.snapshot.meta["targets.json"].hashes = None
        sim.snapshot.version += 1
        sim.update_timestamp()
        match = rf"index version {seen['targets'] - 1} \(targets, as snapshot version \d+ names it\) is older"
    before = client.disk() if role == "timestamp" else None
    with pytest.raises(RollbackRefused, match=match + f" than version .* seen on {sim.url}: a rollback, refused"):
        client.ask()
    if before is not None:
        assert client.disk() == before
    assert client.version(role) == seen[role]
    client.only_trust_folder()


def test_mix_and_match_an_older_snapshot_with_the_current_timestamp(client: Client, sim: TufSimulator) -> None:
    seen = client.version("snapshot")
    sim.publish({ANSWER: b'{"version": "0.2.0", "withdrawn": true}\n'})
    sim.replay["snapshot"] = sim.snapshot.version - 1  # a cache that kept yesterday's snapshot.json
    with pytest.raises(MixAndMatch, match=r"metadata/snapshot.json does not match the length and SHA-256 timestamp "
                                          r"version \d+ states for it: answers of different index versions"):
        client.ask()
    assert client.version("snapshot") == seen


def test_mix_and_match_an_answer_of_an_older_index(client: Client, sim: TufSimulator) -> None:
    sim.publish({ANSWER: b'{"version": "0.2.0", "withdrawn": true}\n'})
    sim.override["/" + ANSWER] = FIRST  # yesterday's bytes under today's metadata
    with pytest.raises(AnswerMismatch, match=f"answer {ANSWER} does not match its metadata"):
        client.ask()
    assert not any(p.name.endswith(".json") and b"withdrawn" in p.read_bytes() for p in client.folder.rglob("*")
                   if p.is_file())


def test_a_target_whose_bytes_do_not_match(client: Client, sim: TufSimulator) -> None:
    sim.publish({"v1/releases/0.3.0.json": b'{"version": "0.3.0"}\n'})
    sim.override["/v1/releases/0.3.0.json"] = b'{"version": "0.3.1"}\n'  # same length, other bytes
    with pytest.raises(AnswerMismatch, match="answer v1/releases/0.3.0.json does not match its metadata .*tampered"):
        client.ask("v1/releases/0.3.0.json")
    assert not (client.folder / "answers" / "v1%2Freleases%2F0.3.0.json").exists()


def test_endless_data_on_the_timestamp(client: Client, sim: TufSimulator) -> None:
    before = client.disk()
    sim.endless.add("/metadata/timestamp.json")
    with pytest.raises(EndlessData, match=r"metadata/timestamp.json is longer than its metadata says \(more than "
                                          r"16384 bytes\): endless data, refused"):
        client.ask()
    assert client.disk() == before


def test_endless_data_on_an_answer(client: Client, sim: TufSimulator) -> None:
    sim.publish({"v1/releases.json": b"[]\n"})
    sim.endless.add("/v1/releases.json")
    with pytest.raises(EndlessData, match=r"answer v1/releases.json longer than its metadata says \(3 bytes\)"):
        client.ask("v1/releases.json")


def test_targets_signed_by_a_key_root_does_not_trust(client: Client, sim: TufSimulator) -> None:
    seen = client.version("targets")
    sim.signers["targets"] = {"x": CryptoSigner.generate_ed25519()}  # root still names the old key
    sim.publish({ANSWER: b'{"forged": true}\n'})
    with pytest.raises(UntrustedSigner, match=r"targets signed by a key root does not trust \(targets was signed by "
                                              r"0/1 keys"):
        client.ask()
    assert client.version("targets") == seen


def test_rotation_is_followed_and_a_compromised_key_rotated_out(client: Client, sim: TufSimulator) -> None:
    old_targets = sim.rotate_keys("targets")  # the online targets key leaked: root 2 names a new one
    sim.root.version += 1
    sim.publish_root()
    sim.publish({ANSWER: b'{"version": "0.2.0", "rotated": true}\n'})
    assert b"rotated" in client.ask(root=False)  # a client with root 1 updates through 2
    assert (client.folder / "root_history" / "2.root.json").read_bytes() == sim.signed_roots[1]
    sim.signers["targets"] = {s.public_key.keyid: s for s in old_targets}  # the thief signs with the old key
    sim.publish({ANSWER: b'{"forged": true}\n'})
    with pytest.raises(UntrustedSigner, match="targets signed by a key root does not trust"):
        client.ask()


def test_a_root_not_signed_by_the_old_threshold_is_refused(tmp_path: Path) -> None:
    sim = TufSimulator(root_keys=2, root_threshold=2)
    try:
        sim.publish({ANSWER: FIRST})
        client = Client(tmp_path, sim)
        assert client.ask() == FIRST
        keep = list(sim.signers["root"].values())[0]
        sim.rotate_keys("root")  # root 2: new keys, signed by them and by only one of root 1's two
        sim.root.version += 1
        sim.publish_root(signers=[keep, *sim.signers["root"].values()])
        with pytest.raises(UntrustedSigner, match=r"root version 2 is not signed by the threshold of keys root "
                                                  r"version 1 trusts .*root was signed by 1/2 keys"):
            client.ask()
        assert sorted(p.name for p in (client.folder / "root_history").iterdir()) == ["1.root.json"]
    finally:
        sim.close()


def test_a_service_without_tuf_metadata_is_refused(tmp_path: Path, sim: TufSimulator) -> None:
    client = Client(tmp_path, sim)
    sim.history.pop("timestamp")  # the service answers 404: it publishes no metadata
    with pytest.raises(NoFreshness, match=f"{sim.url} publishes no TUF metadata .*HTTP 404.*refused"):
        client.ask()
    assert "--insecure-no-freshness" in str(pytest.raises(NoFreshness, client.ask).value)


def test_no_trust_root_fetches_nothing(tmp_path: Path, sim: TufSimulator) -> None:
    client = Client(tmp_path, sim)
    sim.fetched.clear()
    with pytest.raises(NoTrustRoot, match="give --trust-root FILE"):
        client.ask(root=False)
    assert sim.fetched == [] and not client.home.exists()


def test_an_answer_the_index_does_not_list(client: Client, sim: TufSimulator) -> None:
    sim.target_files["v1/releases/9.9.9.json"] = b"{}"  # served, but never signed
    with pytest.raises(NotListed, match=f"{sim.url} lists no signed answer at v1/releases/9.9.9.json"):
        client.ask("v1/releases/9.9.9.json")
    assert "/v1/releases/9.9.9.json" not in sim.fetched


# --- the trust folder is part of the home: planted files (issue 36, item 3) -------------------------------


def _plant(path: Path, kind: str, outside: Path) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "outside-link":
        os.symlink(outside, path)
    else:  # a regular file larger than any metadata or answer
        with open(path, "wb") as f:
            f.truncate(100 << 20)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "outside-link", "huge"])
@pytest.mark.parametrize("name", ["timestamp.json", "snapshot.json", "targets.json", "answers/ANSWER", ".lock"])
def test_a_planted_file_in_the_trust_folder_is_refused_naming_it(client: Client, tmp_path: Path, name: str,
                                                                 kind: str) -> None:
    outside = tmp_path / "outside.json"
    outside.write_bytes(b'{"not": "ours"}')
    path = client.folder / name.replace("ANSWER", quote(ANSWER, ""))
    if kind == "huge" and name == ".lock":
        pytest.skip("the lock file holds nothing: its size is never read")
    _plant(path, kind, outside)
    began = time.monotonic()
    with pytest.raises(BadFile) as e:
        client.ask(root=False)
    assert time.monotonic() - began < 10
    assert str(path) in str(e.value)
    assert outside.read_bytes() == b'{"not": "ours"}'  # never opened for writing through the link


def test_the_root_link_ngclient_makes_is_followed_and_no_other(client: Client, tmp_path: Path) -> None:
    root = client.folder / "root.json"
    assert os.readlink(root).startswith("root_history/")  # ngclient's own link: accepted
    assert client.ask(root=False) == FIRST
    outside = tmp_path / "evil.root.json"
    outside.write_bytes(b"{}")
    root.unlink()
    os.symlink(outside, root)
    with pytest.raises(BadFile, match="is a symbolic link to"):
        client.ask(root=False)


def test_an_answer_is_written_as_a_new_file_renamed_over_the_old(client: Client, sim: TufSimulator) -> None:
    """A cached answer of other bytes is replaced by a new file, not written into: a hard link to it
    elsewhere (the same inode) keeps its bytes."""
    path = client.folder / "answers" / quote(ANSWER, "")
    keep = client.home.parent / "hard-link"
    path.write_bytes(b"stale")
    os.link(path, keep)
    assert client.ask(root=False) == FIRST
    assert keep.read_bytes() == b"stale" and path.read_bytes() == FIRST
