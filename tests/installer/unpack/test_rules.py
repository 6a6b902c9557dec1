"""The member rule (SPEC §8.4): a table of members it accepts and refuses, then real hostile archives.

Each hostile-archive test builds a real .tar.gz in tmp_path, extracts it into a fresh directory,
asserts the typed error with a fragment of its message, and asserts that nothing under tmp_path
changed: nothing was written outside the destination and the destination is gone.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from superfluid.installer.unpack.rules import (
    Entry,
    ExtractLimits,
    Member,
    UnsafeArchive,
    check_tree,
    judge_member,
    name_parts,
)
from superfluid.runtime.kernel.errors import BadFile
from tests.installer.archives import HOSTILE, E, make_tar, refused

D, F, L = Entry("dir"), Entry("file"), (lambda t: Entry("symlink", t))

# --- the rule, pure ---------------------------------------------------------------------------------

ACCEPTED = [
    pytest.param(Member("a.txt", "file"), {}, "a.txt", 0o644, id="plain-file"),
    pytest.param(Member("./a/b.txt", "file"), {}, "a/b.txt", 0o644, id="dot-slash-prefix"),
    pytest.param(Member("a//b/./c", "file"), {}, "a/b/c", 0o644, id="empty-and-dot-components"),
    pytest.param(Member("./", "dir", mode=0o755), {}, "", 0o755, id="root-dir-entry"),
    pytest.param(Member("bin/tool", "file", mode=0o4755), {}, "bin/tool", 0o755, id="setuid-stripped"),
    pytest.param(Member("bin/tool", "file", mode=0o2775), {}, "bin/tool", 0o755, id="setgid-group-write-stripped"),
    pytest.param(Member("ro", "file", mode=0o400), {}, "ro", 0o600, id="owner-always-writes"),
    pytest.param(Member("d", "dir", mode=0o1777), {}, "d", 0o755, id="sticky-world-write-stripped"),
    pytest.param(Member("d", "dir", mode=0o750), {"d": D}, "d", 0o750, id="dir-repeated"),
    pytest.param(Member("lib/a.so", "symlink", linkname="a.so.1"), {"lib": D}, "lib/a.so", 0o755,
                 id="sibling-link"),
    pytest.param(Member("lib/x", "symlink", linkname="../share/x"), {}, "lib/x", 0o755, id="link-up-and-down"),
    pytest.param(Member("l", "symlink", linkname="."), {}, "l", 0o755, id="link-to-root"),
    pytest.param(Member("p", "symlink", linkname="q/.."), {"q": L("d/e")}, "p", 0o755,
                 id="link-through-deeper-link"),
    pytest.param(Member("h", "hardlink", linkname="./a"), {"a": F}, "h", 0o644, id="hardlink-to-earlier-file"),
]


@pytest.mark.parametrize(("member", "tree", "path", "mode"), ACCEPTED)
def test_judge_accepts(member: Member, tree: dict[str, Entry], path: str, mode: int) -> None:
    verdict = judge_member(member, tree)
    assert verdict.fault is None
    assert verdict.path == path
    if member.kind != "symlink":
        assert verdict.mode == mode


REFUSED = [
    pytest.param(Member("../evil", "file"), {}, "climbs with '..'", id="dotdot"),
    pytest.param(Member("a/../../evil", "file"), {}, "climbs with '..'", id="dotdot-nested"),
    pytest.param(Member("a/..", "dir"), {}, "climbs with '..'", id="dotdot-harmless-still-refused"),
    pytest.param(Member("/etc/passwd", "file"), {}, "is absolute", id="absolute"),
    pytest.param(Member("//x", "file"), {}, "is absolute", id="absolute-double-slash"),
    pytest.param(Member("dev", "chardev"), {}, "is a character device", id="chardev"),
    pytest.param(Member("dev", "blockdev"), {}, "is a block device", id="blockdev"),
    pytest.param(Member("pipe", "fifo"), {}, "is a FIFO", id="fifo"),
    pytest.param(Member("odd", "other"), {}, "is a special file", id="other-type"),
    pytest.param(Member("x" * 5000, "file"), {}, "longer than 4096 bytes", id="name-too-long"),
    pytest.param(Member("", "file"), {}, "has an empty name", id="empty-name"),
    pytest.param(Member("a/" * 128 + "x", "file"), {}, "nests deeper than 128 directories", id="too-deep"),
    pytest.param(Member("l/x", "file"), {"l": L("sub")}, "goes through the symlink 'l'", id="write-through-link"),
    pytest.param(Member("a/l/x", "dir"), {"a": D, "a/l": L(".")}, "goes through the symlink 'a/l'",
                 id="dir-through-link"),
    pytest.param(Member("f/x", "file"), {"f": F}, "which is a file", id="inside-a-file"),
    pytest.param(Member("lib.so", "file"), {"lib.so": L("real.so")}, "appears twice", id="file-over-link"),
    pytest.param(Member("lib.so", "symlink", linkname="x"), {"lib.so": F}, "appears twice", id="link-over-file"),
    pytest.param(Member("d", "symlink", linkname="x"), {"d": D}, "appears twice", id="link-over-dir"),
    pytest.param(Member("d", "dir"), {"d": L("x")}, "appears twice", id="dir-over-link"),
    pytest.param(Member("l", "symlink", linkname="/etc"), {}, "an absolute target", id="link-absolute"),
    pytest.param(Member("l", "symlink", linkname=".."), {}, "outside the install", id="link-parent"),
    pytest.param(Member("a/l", "symlink", linkname="../../x"), {}, "outside the install", id="link-climbs"),
    pytest.param(Member("l", "symlink", linkname="a/../../x"), {}, "outside the install", id="link-climbs-late"),
    pytest.param(Member("l", "symlink", linkname=""), {}, "empty target", id="link-empty"),
    pytest.param(Member("p", "symlink", linkname="d/e/q/.."), {"d": D, "d/e": D, "d/e/q": L("../..")},
                 "outside the install", id="chain-link-points-shallower"),
    pytest.param(Member("p", "symlink", linkname="q/x"), {"q": L("/etc")}, "outside the install",
                 id="chain-through-absolute-link"),
    pytest.param(Member("p", "symlink", linkname="a"), {"a": L("b"), "b": L("a")}, "loops", id="link-loop"),
    pytest.param(Member("h", "hardlink", linkname="/etc/passwd"), {}, "hard link to '/etc/passwd', outside",
                 id="hardlink-absolute"),
    pytest.param(Member("h", "hardlink", linkname="../x"), {}, "outside the install", id="hardlink-climbs"),
    pytest.param(Member("h", "hardlink", linkname="later"), {}, "not a regular file earlier", id="hardlink-unknown"),
    pytest.param(Member("h", "hardlink", linkname="l"), {"l": L("a")}, "not a regular file earlier",
                 id="hardlink-to-link"),
    pytest.param(Member("h", "hardlink", linkname="d"), {"d": D}, "not a regular file earlier",
                 id="hardlink-to-dir"),
    pytest.param(Member("h", "hardlink", linkname="."), {}, "outside the install", id="hardlink-to-root"),
]


@pytest.mark.parametrize(("member", "tree", "fragment"), REFUSED)
def test_judge_refuses(member: Member, tree: dict[str, Entry], fragment: str) -> None:
    verdict = judge_member(member, tree)
    assert verdict.path is None
    assert verdict.fault is not None and fragment in verdict.fault


def test_judge_is_pure() -> None:
    tree = {"a": L("b")}
    judge_member(Member("c", "symlink", linkname="a"), tree)
    assert tree == {"a": L("b")}


def test_limits_allowance() -> None:
    limits = ExtractLimits(max_bytes=1000, max_ratio=10, ratio_floor=100)
    assert limits.allowance(5) == 100  # the floor
    assert limits.allowance(50) == 500  # the ratio
    assert limits.allowance(500) == 1000  # the cap


NAMES = [
    pytest.param("a/b", ["a", "b"], id="plain"),
    pytest.param("./a//b/.", ["a", "b"], id="dot-and-empty-dropped"),
    pytest.param(".", [], id="root"),
    pytest.param("/etc/passwd", None, id="absolute"),
    pytest.param("a/../b", None, id="dotdot"),
]


@pytest.mark.parametrize(("name", "parts"), NAMES)
def test_name_parts(name: str, parts: list[str] | None) -> None:
    assert name_parts(name) == parts


# --- real hostile archives ---------------------------------------------------------------------------

@pytest.mark.parametrize(("entries", "fragment"), HOSTILE)
def test_hostile_tar_refused(area: Path, entries: list[E], fragment: str) -> None:
    fixed = [E(e.kind, e.name.format(area=area), e.data.format(area=area) if isinstance(e.data, str) else e.data,
               e.mode) for e in entries]
    archive = make_tar(area / "hostile.tar.gz", fixed)
    err = refused(area, archive, fragment)
    assert isinstance(err, BadFile) and err.path == str(archive)
    assert (area / "outside" / "victim").read_text() == "precious\n"


def test_deep_nesting_refused_cleanly(area: Path) -> None:
    archive = make_tar(area / "deep.tar.gz", [E("file", "d/" * 1500 + "x", "x")])
    refused(area, archive, "nests deeper than 128 directories")


def test_member_count_bomb(area: Path) -> None:
    archive = make_tar(area / "many.tar.gz", [E("file", f"f{i}", "") for i in range(11)])
    refused(area, archive, "more than 10 members", limits=ExtractLimits(max_members=10))


def test_size_bomb_refused_before_writing(area: Path) -> None:
    archive = area / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        ti = tarfile.TarInfo("zeros")
        ti.size = 64 << 20
        tar.addfile(ti, io.BytesIO(bytes(ti.size)))
    assert archive.stat().st_size < 1 << 20  # a real bomb: ~64 MiB of zeros in well under 1 MiB
    refused(area, archive, "would unpack to more than", limits=ExtractLimits(max_ratio=20, ratio_floor=1 << 20))


def test_total_cap(area: Path) -> None:
    archive = make_tar(area / "big.tar.gz", [E("file", "a", b"x" * 600), E("file", "b", b"y" * 600)])
    refused(area, archive, "more than 1000 bytes", limits=ExtractLimits(max_bytes=1000, ratio_floor=1000))


# --- the rule over a finished tree ------------------------------------------------------------------

def test_check_tree_refuses_special_files_and_setuid(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    os.mkfifo(tmp_path / "t" / "p")
    with pytest.raises(UnsafeArchive, match="'p' is a FIFO"):
        check_tree(tmp_path / "t", "label")
    os.unlink(tmp_path / "t" / "p")
    (tmp_path / "t" / "s").write_text("s")
    os.chmod(tmp_path / "t" / "s", 0o4755)
    with pytest.raises(UnsafeArchive, match="setuid"):
        check_tree(tmp_path / "t", "label")


def test_check_tree_resolves_each_link_against_the_whole_tree(tmp_path: Path) -> None:
    (tmp_path / "t" / "d").mkdir(parents=True)
    (tmp_path / "t" / "d" / "up").symlink_to("..")
    (tmp_path / "t" / "ok").symlink_to("d/up/d")
    check_tree(tmp_path / "t", "label")
    (tmp_path / "t" / "away").symlink_to("d/up/..")
    with pytest.raises(UnsafeArchive, match="'away' links to 'd/up/..', outside the install"):
        check_tree(tmp_path / "t", "label")
