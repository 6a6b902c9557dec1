"""``manifest/sources``: where the manifest service reads releases — a directory of release folders
(hidden ones skipped, a stamp that changes with any file), a mirror URL or ``github:OWNER/REPO`` —
and the one ``--source`` spelling of each."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from superfluid.manifest import sources
from superfluid.manifest.settings import read_settings
from superfluid.manifest.sources import DirectorySource, ListingSource, source_from
from superfluid.runtime.kernel.errors import BadFile, UsageError
from tests.release_server import ReleaseServer, sha256_line

REPO = "acme/superfluid"


@pytest.fixture
def release_folders(tmp_path: Path) -> Path:
    root = tmp_path / "releases"
    for folder, files in {"r0.1.0": {"a.tar.gz": b"one", "a.tar.gz.sha256": b"x"},
                          "r0.2.0": {"b.tar.gz": b"two"}, ".r0.3.0": {"c.tar.gz": b"being written"}}.items():
        (root / folder).mkdir(parents=True)
        for name, data in files.items():
            (root / folder / name).write_bytes(data)
    (root / "README").write_text("a file beside the folders: not a release")
    (root / "r0.2.0" / ".partial").write_text("hidden")
    return root


def test_a_directory_is_its_visible_folders_by_name(release_folders: Path) -> None:
    snap = DirectorySource(release_folders).snapshot()
    assert [(f.where, sorted(f.names)) for f in snap.folders] == [("r0.1.0", ["a.tar.gz", "a.tar.gz.sha256"]),
                                                                 ("r0.2.0", ["b.tar.gz"])]
    one = snap.folders[0]
    assert one.read("a.tar.gz", max_bytes=10) == b"one" and one.read("absent", max_bytes=10) is None
    assert one.sha256("a.tar.gz") == hashlib.sha256(b"one").hexdigest() and one.sha256("absent") is None
    assert DirectorySource(release_folders).describe() == f"the release folders in {release_folders.resolve()}"


def test_the_stamp_changes_with_any_file_and_only_then(release_folders: Path) -> None:
    source = DirectorySource(release_folders)
    first = source.snapshot().stamp
    assert source.snapshot().stamp == first
    (release_folders / ".r0.3.0" / "c.tar.gz").write_bytes(b"still being written")  # hidden: no change
    assert source.snapshot().stamp == first
    (release_folders / "r0.2.0" / "b.tar.gz").write_bytes(b"two, longer")
    second = source.snapshot().stamp
    assert second != first
    os.rename(release_folders / ".r0.3.0", release_folders / "r0.3.0")  # written beside, renamed in
    assert source.snapshot().stamp not in (first, second)


def test_a_file_read_past_its_cap_or_not_regular_is_a_bad_file(release_folders: Path) -> None:
    os.mkfifo(release_folders / "r0.2.0" / "b.tar.gz.sha256")
    (folder,) = [f for f in DirectorySource(release_folders).snapshot().folders if f.where == "r0.2.0"]
    with pytest.raises(BadFile, match="larger than 2 bytes"):
        folder.read("b.tar.gz", max_bytes=2)
    with pytest.raises(BadFile, match="not a regular file"):  # never waited on
        folder.read("b.tar.gz.sha256", max_bytes=100)
    with pytest.raises(BadFile, match="is not a regular file"):
        folder.sha256("b.tar.gz.sha256")


def test_a_files_digest_is_remembered_while_it_is_unchanged(release_folders: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    source = DirectorySource(release_folders)
    path = release_folders / "r0.1.0" / "a.tar.gz"
    hashed: list[Path] = []
    real = sources.file_sha256
    monkeypatch.setattr(sources, "file_sha256", lambda p: hashed.append(p) or real(p))
    assert source.file_sha256(path) == source.file_sha256(path) == hashlib.sha256(b"one").hexdigest()
    path.write_bytes(b"changed")
    assert source.file_sha256(path) == hashlib.sha256(b"changed").hexdigest()
    assert hashed == [path, path] and source.file_sha256(release_folders / "r0.1.0" / "gone") is None


def test_an_unlistable_directory_is_a_bad_file(tmp_path: Path) -> None:
    with pytest.raises(BadFile, match="cannot be listed"):
        DirectorySource(tmp_path / "absent").snapshot()


@pytest.mark.parametrize(("spec", "fragment"), [
    pytest.param("github:acme", "--source github:acme: ", id="github-not-owner-repo"),
    pytest.param("https://mirror.example/acme", "a mirror URL names a repository's folder", id="mirror-too-short"),
    pytest.param("ftp://mirror.example/r/acme/superfluid/", "give a directory, an http(s):// mirror URL or github:",
                 id="another-scheme"),
    pytest.param("{tmp}/absent", "no such directory", id="no-directory"),
    pytest.param("{tmp}/file", "no such directory", id="a-file"),
])
def test_source_from_refuses(tmp_path: Path, spec: str, fragment: str) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        source_from(spec.format(tmp=tmp_path), read_settings({"SUPERFLUID_HOME": str(tmp_path / "home")}))


def test_source_from_a_directory_or_a_file_url(release_folders: Path, tmp_path: Path) -> None:
    for spec in (str(release_folders), release_folders.as_uri()):
        source = source_from(spec, read_settings({"SUPERFLUID_HOME": str(tmp_path / "home")}))
        assert isinstance(source, DirectorySource) and source.root == release_folders.resolve()


def test_source_from_github_and_a_mirror_url(tmp_path: Path) -> None:
    env = read_settings({"SUPERFLUID_HOME": str(tmp_path / "home"), "SUPERFLUID_MIRROR": "/ignored/for/github"})
    github = source_from("github:acme/superfluid", env)
    assert isinstance(github, ListingSource) and github.repo == REPO and "acme/superfluid" in github.describe()
    mirror = source_from("https://mirror.example/releases/acme/superfluid/", env)
    assert isinstance(mirror, ListingSource) and mirror.repo == REPO
    assert "mirror.example/releases/" in mirror.source.describe()
    github.close()
    mirror.close()


def test_a_mirrors_releases_are_folders_read_through_the_installer(release_server: ReleaseServer,
                                                                   tmp_path: Path) -> None:
    release_server.add_release(REPO, "v0.1.0", {"a.tar.gz": b"one", "a.tar.gz.sha256": sha256_line("a.tar.gz", b"one")})
    source = source_from(f"{release_server.mirror_url}{REPO}/",
                         read_settings({"SUPERFLUID_HOME": str(tmp_path / "home")}))
    try:
        snap = source.snapshot()
        (folder,) = snap.folders
        assert (folder.where, sorted(folder.names)) == ("v0.1.0", ["a.tar.gz", "a.tar.gz.sha256"])
        assert folder.read("a.tar.gz", max_bytes=10) == b"one" and folder.read("absent", max_bytes=10) is None
        assert folder.sha256("a.tar.gz") == hashlib.sha256(b"one").hexdigest()
        with pytest.raises(BadFile, match="is larger than 2 bytes"):
            folder.read("a.tar.gz", max_bytes=2)
        assert source.snapshot().stamp == snap.stamp
        release_server.add_release(REPO, "v0.2.0", {"b.tar.gz": b"two"})
        assert source.snapshot().stamp != snap.stamp
    finally:
        source.close()
