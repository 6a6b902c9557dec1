"""``manifest/export``: every answer of the manifest service as a file at the path it is served at,
written into a new directory and renamed into place; only an empty directory or an earlier export
is ever replaced."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from superfluid.installer.trust.identity import Identity
from superfluid.manifest.answers import render
from superfluid.manifest.export import export, export_routes
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import generate
from superfluid.manifest.routes import Page, ReleaseList, ReleaseOne
from superfluid.manifest.sources import DirectorySource
from superfluid.runtime.kernel.errors import BadFile, UsageError
from tests.manifest.release_folders import base_document, vary, write_release

ATTESTED = Identity("acme/superfluid", ".github/workflows/release.yml", "refs/tags/v0.2.0")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("releases")
    key = generate()
    doc = base_document()
    write_release(root, "r0.1.0", vary(doc, "0.1.0"), key)
    write_release(root, "r0.2.0", vary(doc, "0.2.0", abi=2, line=None), key, ATTESTED)
    return build_index(DirectorySource(root).snapshot(), [TrustedKey(key.public(), "test.pub")])


def test_routes_start_with_the_page_the_list_and_each_release(index: Index) -> None:
    routes = export_routes(index)
    assert routes[:4] == [Page(), ReleaseList(), ReleaseOne("0.2.0"), ReleaseOne("0.1.0")]
    assert len(routes) > 4 and len({r.path for r in routes}) == len(routes)
    assert export_routes(index) == routes  # a stable order


def test_each_file_holds_the_bytes_the_server_answers(index: Index, tmp_path: Path) -> None:
    out = tmp_path / "site"
    written = export(index, out)
    assert written[:4] == [Path("index.html"), Path("v1/releases.json"), Path("v1/releases/0.2.0.json"),
                           Path("v1/releases/0.1.0.json")]
    assert sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) == sorted(written)
    for route, rel in zip(export_routes(index), written, strict=True):
        assert (out / rel).read_bytes() == render(index, route).data, rel
    for d in [out, *(p for p in out.rglob("*") if p.is_dir())]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o755  # a web server's user reads it
    assert [n for n in os.listdir(tmp_path) if n != "site"] == []  # no stage left beside it


def test_beside_each_compat_document_the_workflow_that_attests_it(index: Index, tmp_path: Path) -> None:
    out = tmp_path / "site"
    export(index, out)
    one = json.loads((out / "v1" / "releases" / "0.2.0.json").read_text())
    assert one["attested_by"] == ATTESTED.to_json() and json.loads(one["document"])["release"]["attested_by"] == \
        ATTESTED.to_json()
    listing = json.loads((out / "v1" / "releases.json").read_text())
    assert {r["version"]: r["attested_by"] for r in listing["releases"]} == {"0.2.0": ATTESTED.to_json(),
                                                                             "0.1.0": None}


def test_an_earlier_export_is_replaced_whole(index: Index, tmp_path: Path) -> None:
    out = tmp_path / "site"
    export(index, out)
    (out / "v1" / "stale.json").write_text("{}")
    export(index, out)
    assert not (out / "v1" / "stale.json").exists() and (out / "v1" / "releases.json").is_file()
    assert os.listdir(tmp_path) == ["site"]


def test_an_empty_directory_is_filled(index: Index, tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    export(index, tmp_path / "site")
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize(("make", "fragment"), [
    pytest.param(lambda p: (p.mkdir(), (p / "notes.txt").write_text("mine")), "is neither empty nor an earlier export",
                 id="someone-elses-directory"),
    pytest.param(lambda p: p.write_text("a file"), "is not a directory", id="a-file"),
])
def test_anything_else_is_never_overwritten(index: Index, tmp_path: Path, make: object, fragment: str) -> None:
    out = tmp_path / "site"
    make(out)  # type: ignore[operator]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(UsageError, match=fragment):
        export(index, out)
    assert sorted(os.listdir(tmp_path)) == before
    if out.is_dir():
        assert os.listdir(out) == ["notes.txt"]


def test_a_place_that_cannot_be_written_is_a_bad_file(index: Index, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadFile, match="cannot be written"):
        export(index, tmp_path / "file" / "site")
