"""``runtime/home_cache``: a cache file of the home is read as a JSON object or ``{}``, written whole
or not at all (never through a link in the home); a path an answer depends on is fingerprinted, and the
answer used while it is unchanged; a fact of a file this process wrote is kept while the file is unchanged."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from superfluid.runtime.kernel import home_cache

MAX = 1 << 10
NESTED_60: list[object] = []
for _ in range(59):
    NESTED_60 = [NESTED_60]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(path: Path) -> None:
    target = path.parent / "target.json"
    target.write_text('{"a": 1}')
    path.symlink_to(target)


@pytest.mark.parametrize(("make", "want"), [
    pytest.param(lambda p: p.write_text('{"a": 1, "b": [2]}'), {"a": 1, "b": [2]}, id="an-object"),
    pytest.param(lambda p: None, {}, id="absent"),
    pytest.param(lambda p: p.write_text("[1, 2]"), {}, id="an-array"),
    pytest.param(lambda p: p.write_text('"text"'), {}, id="a-string"),
    pytest.param(lambda p: p.write_text('{"a": '), {}, id="cut-short"),
    pytest.param(lambda p: p.write_bytes(b'{"a": "\xff"}'), {}, id="not-utf-8"),
    pytest.param(lambda p: p.write_text('{"a": "' + "x" * MAX + '"}'), {}, id="too-large"),
    pytest.param(lambda p: p.write_text('{"a": ' + "[" * 100 + "]" * 100 + "}"), {}, id="too-deep"),
    pytest.param(lambda p: p.write_text('{"a": ' + "[" * 60 + "]" * 60 + "}"), {"a": NESTED_60}, id="deep-enough"),
    pytest.param(lambda p: p.mkdir(), {}, id="a-directory"),
    pytest.param(_fifo, {}, id="a-fifo"),
    pytest.param(_link, {}, id="a-link"),
])
def test_read_object(tmp_path: Path, make: Callable[[Path], None], want: dict[str, object]) -> None:
    path = tmp_path / "answers.json"
    make(path)
    assert home_cache.read_object(str(path), max_bytes=MAX) == want


def test_write_makes_the_folders_and_writes_whole(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "kept" / "runtimes.json"
    assert home_cache.write(str(tmp_path), str(path), b'{"k": 1}') is True
    assert path.read_bytes() == b'{"k": 1}' and os.listdir(path.parent) == ["runtimes.json"]
    assert home_cache.write(str(tmp_path), str(path), b"{}") is True and path.read_bytes() == b"{}"


@pytest.mark.parametrize("linked", ["cache", "cache/kept"])
def test_write_never_goes_through_a_link_in_the_home(tmp_path: Path, linked: str) -> None:
    home, outside = tmp_path / "home", tmp_path / "outside"
    outside.mkdir()
    (home / linked).parent.mkdir(parents=True, exist_ok=True)
    (home / linked).symlink_to(outside, target_is_directory=True)
    assert home_cache.write(str(home), str(home / "cache" / "kept" / "x.json"), b"{}") is False
    assert list(outside.rglob("*")) == []


def test_a_link_above_the_home_is_the_homes_business(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    home = tmp_path / "home"
    home.symlink_to(tmp_path / "real", target_is_directory=True)
    assert home_cache.write(str(home), str(home / "cache" / "x.json"), b"{}") is True
    assert (tmp_path / "real" / "cache" / "x.json").read_bytes() == b"{}"


def test_a_refused_write_is_no_error(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the folder goes")
    assert home_cache.write(str(tmp_path), str(tmp_path / "cache" / "x.json"), b"{}") is False


def test_fingerprint_of_a_file_changes_with_it(tmp_path: Path) -> None:
    path = tmp_path / "lib.so"
    assert home_cache.fingerprint(str(path)) is None
    path.write_bytes(b"one")
    first = home_cache.fingerprint(str(path))
    assert first is not None and len(first) == 5 and first[2] == 3
    os.utime(path, ns=(first[3] + 10**9, first[3] + 10**9))
    assert home_cache.fingerprint(str(path)) != first
    assert home_cache.changed_at(home_cache.fingerprint(str(path))) == max(first[3] + 10**9, first[4])


def test_fingerprint_through_a_link_holds_what_it_leads_to(tmp_path: Path) -> None:
    target, link = tmp_path / "lib.so.1", tmp_path / "lib.so"
    target.write_bytes(b"library")
    link.symlink_to(target.name)
    facts = home_cache.fingerprint(str(link))
    assert facts is not None and len(facts) == 10 and facts[7] == len(b"library")
    os.utime(target, ns=(4 * 10**18, 4 * 10**18))  # the link itself unchanged, what it leads to changed
    assert home_cache.changed_at(home_cache.fingerprint(str(link))) == 4 * 10**18
    target.unlink()
    dangling = home_cache.fingerprint(str(link))
    assert dangling is not None and len(dangling) == 6 and dangling[5] is None


@pytest.mark.parametrize(("facts", "want"), [
    pytest.param(None, 0, id="none"),
    pytest.param([0, 1, 2, 30, 40], 40, id="file-ctime"),
    pytest.param([0, 1, 2, 50, 40], 50, id="file-mtime"),
    pytest.param([0, 1, 2, 30, 40, 0, 1, 2, 90, 60], 90, id="link-target"),
    pytest.param([0, 1, 2, 30, 40, None], 40, id="dangling-link"),
])
def test_changed_at(facts: list[object] | None, want: int) -> None:
    assert home_cache.changed_at(facts) == want


def test_a_stamp_is_a_regular_file_not_a_link(tmp_path: Path) -> None:
    stamp, link = tmp_path / "basert-recipe-0123", tmp_path / "linked"
    assert home_cache.stamped(str(stamp)) is False
    stamp.write_bytes(b"")
    link.symlink_to(stamp.name)
    (tmp_path / "folder").mkdir()
    assert [home_cache.stamped(str(p)) for p in (stamp, link, tmp_path / "folder")] == [True, False, False]


def test_a_dependency_is_unchanged_until_its_path_changes(tmp_path: Path) -> None:
    path, gone = tmp_path / "lib.so", tmp_path / "missing"
    path.write_bytes(b"one")
    deps = json.loads(json.dumps([home_cache.dependency(str(path)), home_cache.dependency(str(gone))]))  # as kept
    assert deps[1] == [str(gone), None] and home_cache.unchanged(deps)
    os.utime(path, ns=(10**18, 10**18))
    assert not home_cache.unchanged(deps) and home_cache.unchanged([])


@pytest.mark.parametrize("kept", [
    pytest.param([["/x"]], id="short"), pytest.param([[1, None]], id="path-not-text"),
    pytest.param(["/x"], id="not-a-list"), pytest.param([["/nowhere", [1, 2, 3, 4, 5]]], id="was-there"),
])
def test_a_dependency_that_is_not_one_is_changed(kept: list[object]) -> None:
    assert home_cache.unchanged(kept) is False


def test_a_fact_is_kept_across_a_rename_and_a_chmod(tmp_path: Path) -> None:
    path = tmp_path / "a"
    path.write_bytes(b"12345")
    kept: home_cache.Written[str] = home_cache.Written()
    kept.keep(os.stat(path), "fact")
    moved = tmp_path / "b"
    path.rename(moved)
    moved.chmod(0o755)
    assert kept.get(os.stat(moved)) == "fact"


def test_a_file_rewritten_or_never_kept_has_none(tmp_path: Path) -> None:
    path, other = tmp_path / "a", tmp_path / "b"
    path.write_bytes(b"12345")
    other.write_bytes(b"12345")
    kept: home_cache.Written[str] = home_cache.Written()
    kept.keep(os.stat(path), "fact")
    assert kept.get(os.stat(other)) is None  # another file (inode)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched: another modification time
    assert kept.get(os.stat(path)) is None
    kept.keep(os.stat(path), "again")
    with path.open("ab") as f:
        f.write(b"6")  # grown: another size
    assert kept.get(os.stat(path)) is None


def test_settled_dependencies_are_none_when_a_path_changed_as_the_computation_began(tmp_path: Path) -> None:
    old, absent = tmp_path / "old", tmp_path / "absent"
    old.write_text("x")
    past = os.stat(old).st_mtime - 10
    os.utime(old, (past, past))  # its change time is now: the entry begins later
    began = time.time() + home_cache.RACY_SECONDS + 0.05
    deps = home_cache.settled([str(old), str(absent)], began)
    assert deps == [home_cache.dependency(str(old)), [str(absent), None]]  # absent, and kept so
    assert home_cache.unchanged(deps)
    assert home_cache.settled([str(old)], began - home_cache.RACY_SECONDS) is None  # changed just before it began
    absent.write_text("")
    assert not home_cache.unchanged(deps)  # its appearing is a change
