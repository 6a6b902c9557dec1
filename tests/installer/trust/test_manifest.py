"""``installer/manifest_trust``: where a service's trust folder is (one per service, a pure path),
which root a client starts from (the named one, else the newest it kept, else a usage error that
fetched nothing), the folder never made through a link, and an answer fetched fresh or, when asked
so, unchecked and said to be. The attacks are tests/installer/trust/test_tuf_client.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from superfluid.installer.trust.manifest import Trust, _anchor, fetch_answer, trust_dir
from superfluid.installer.trust.refusals import NoTrustRoot
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.conftest import ANSWER, FIRST
from tests.tuf_simulator import TufSimulator

# --- the trust folder (pure) --------------------------------------------------------------------------

SERVICES = ["https://manifest.example/", "https://manifest.example:8443/", "https://manifest.example/other/",
            "http://manifest.example/", "http://127.0.0.1:8000/", "https://MANIFEST.example/"]


def test_one_folder_per_service_below_the_homes_trust() -> None:
    folders = [trust_dir("/h", s) for s in SERVICES]
    assert len(set(folders)) == len(SERVICES)
    assert all(os.path.dirname(f) == "/h/trust" for f in folders)
    assert trust_dir("/h", SERVICES[0]) == trust_dir("/h", SERVICES[0])  # stable


@pytest.mark.parametrize("service", [
    pytest.param("https://manifest.example/", id="plain"),
    pytest.param("https://a.example/" + "x" * 300, id="long-path"),
    pytest.param("https://a.example/../../etc/", id="dot-dot"),
    pytest.param("https://u:p@a.example/", id="userinfo"),
    pytest.param("file:///srv/manifest/", id="file"),
])
def test_a_folder_name_is_one_safe_segment(service: str) -> None:
    name = os.path.basename(trust_dir("/h", service))
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,77}", name), name
    assert not name.startswith((".", "-")) and "p@" not in name and ".." not in name.split("-")[0]


# --- which root ------------------------------------------------------------------------------------------

def _history(folder: Path, *names: str) -> None:
    (folder / "root_history").mkdir(parents=True)
    for n in names:
        (folder / "root_history" / n).write_text(n)


@pytest.mark.parametrize(("names", "chosen"), [
    pytest.param(["1.root.json"], "1.root.json", id="one"),
    pytest.param(["1.root.json", "2.root.json", "10.root.json"], "10.root.json", id="the-newest-by-number"),
    pytest.param(["1.root.json", "0.root.json", "02.root.json", "x.root.json", "3.root.json.tmp"], "1.root.json",
                 id="odd-names-ignored"),
])
def test_the_newest_kept_root(tmp_path: Path, names: list[str], chosen: str) -> None:
    _history(tmp_path, *names)
    data, where = _anchor(Trust(str(tmp_path / "home")), str(tmp_path), "https://m.example/")
    assert (data.decode(), where) == (chosen, str(tmp_path / "root_history" / chosen))


def test_a_named_root_wins_over_the_kept_ones(tmp_path: Path) -> None:
    _history(tmp_path, "5.root.json")
    named = tmp_path / "given.json"
    named.write_text("given")
    assert _anchor(Trust("/h", str(named)), str(tmp_path), "s") == (b"given", str(named))


def test_a_named_root_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(BadFile) as e:
        _anchor(Trust("/h", str(tmp_path / "absent.json")), str(tmp_path), "s")
    assert e.value.path == str(tmp_path / "absent.json")


@pytest.mark.parametrize("names", [pytest.param([], id="empty-history"), pytest.param(None, id="no-history"),
                                   pytest.param(["0.root.json", "root.json"], id="no-valid-name")])
def test_no_root_is_a_usage_error(tmp_path: Path, names: list[str] | None) -> None:
    if names is not None:
        _history(tmp_path, *names)
    with pytest.raises(NoTrustRoot) as e:
        _anchor(Trust("/h"), str(tmp_path), "https://m.example/")
    fix = e.value.advice  # both ways out, in the advice (issue 35, item 12): --json's fix named only the second
    assert fix is not None and "give --trust-root FILE" in fix and "--insecure-no-freshness" in fix
    assert "--trust-root" in str(e.value)


# --- asking --------------------------------------------------------------------------------------------------

def test_a_fresh_answer_records_what_it_was_checked_with(tmp_path: Path, sim: TufSimulator) -> None:
    root = tmp_path / "1.root.json"
    root.write_bytes(sim.signed_roots[0])
    home = tmp_path / "home"
    got = fetch_answer(sim.url, "/" + ANSWER, Trust(str(home), str(root)), max_bytes=1 << 20)
    assert (got.status, got.body) == (200, FIRST)
    assert got.freshness.get("checked") is not False
    folder = Path(trust_dir(str(home), sim.url))
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700


def test_an_answer_larger_than_asked_is_refused(tmp_path: Path, sim: TufSimulator) -> None:
    root = tmp_path / "1.root.json"
    root.write_bytes(sim.signed_roots[0])
    with pytest.raises(BadFile, match=f"larger than {len(FIRST) - 1} bytes"):
        fetch_answer(sim.url, ANSWER, Trust(str(tmp_path / "home"), str(root)), max_bytes=len(FIRST) - 1)


def test_unchecked_when_asked_and_said_so(tmp_path: Path, sim: TufSimulator,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    got = fetch_answer(sim.url, ANSWER, Trust(str(home), insecure=True), max_bytes=1 << 20)
    assert (got.status, got.body, got.freshness) == (200, FIRST, {"checked": False})
    assert sim.fetched[-1:] == ["/" + ANSWER] and not any("metadata" in p for p in sim.fetched)  # no TUF asked
    assert "--insecure-no-freshness" in capsys.readouterr().err
    assert not home.exists()  # nothing kept of an unchecked answer


def test_no_root_fetches_nothing_and_writes_nothing(tmp_path: Path, sim: TufSimulator) -> None:
    home = tmp_path / "home"
    before = list(sim.fetched)
    with pytest.raises(NoTrustRoot):
        fetch_answer(sim.url, ANSWER, Trust(str(home)), max_bytes=1 << 20)
    assert not home.exists() and sim.fetched == before


def test_the_trust_folder_is_never_made_through_a_link(tmp_path: Path, sim: TufSimulator) -> None:
    root = tmp_path / "1.root.json"
    root.write_bytes(sim.signed_roots[0])
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", home / "trust")
    with pytest.raises(BadFile) as e:
        fetch_answer(sim.url, ANSWER, Trust(str(home), str(root)), max_bytes=1 << 20)
    assert e.value.path == str(home / "trust")
    assert os.listdir(tmp_path / "elsewhere") == []
