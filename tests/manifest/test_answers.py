"""``manifest/answers``: the service's answers as bytes, the same for the server and the static export:
the release list and one release (or why it is not there), errors that name the parameter, the page
a person reads (escaped), and the one-cell-per-runtime summary ``check`` prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.answers import HTML, JSON, drives_cells, encode, error_body, releases_answer, render
from superfluid.manifest.choose import choose
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey
from superfluid.manifest.routes import Choose, Health, Page, ReleaseList, ReleaseOne, Route
from superfluid.manifest.sources import DirectorySource
from superfluid.runtime import registry
from superfluid.runtime.kernel.schema import errors
from tests.manifest.release_folders import vary, write_release


@pytest.fixture(scope="module")
def with_rejected(tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], key: SecretKey,
                  trusted: list[TrustedKey]) -> Index:
    """One good release (0.1.0) and one unsigned (0.2.0) in a folder whose name is markup."""
    root = tmp_path_factory.mktemp("answers")
    write_release(root, "r0.1.0", vary(doc, "0.1.0"), key)
    write_release(root, "<b>unsigned", vary(doc, "0.2.0"), None)
    return build_index(DirectorySource(root).snapshot(), trusted)


def test_encode_is_indented_utf8_json_with_a_newline() -> None:
    assert encode({"a": "é", "b": [1]}) == '{\n  "a": "é",\n  "b": [\n    1\n  ]\n}\n'.encode()


def test_an_error_names_its_parameter_and_status() -> None:
    body = error_body(404, "version", "no such release", rejected={"version": "1"})
    assert (body.status, body.content_type) == (404, JSON)
    assert json.loads(body.data) == {"error": "no such release", "parameter": "version", "status": 404,
                                     "rejected": {"version": "1"}}


def test_releases_answer_matches_its_schema(fleet: Index) -> None:
    answer = json.loads(render(fleet, ReleaseList()).data)
    assert errors(answer, "manifest-releases") == []
    assert [r["version"] for r in answer["releases"]] == ["0.10.0", "0.3.0", "0.2.0", "0.1.0"]
    assert answer["signatures_required"] is True and len(answer["keys"]) == 1


def test_without_keys_signatures_are_not_required(tmp_path: Path) -> None:
    answer = releases_answer(build_index(DirectorySource(tmp_path).snapshot(), []))
    assert answer == {"releases": [], "rejected": [], "keys": [], "signatures_required": False}


@pytest.mark.parametrize(("version", "status", "fragment"), [
    pytest.param("0.1.0", 200, None, id="verified"),
    pytest.param("0.2.0", 404, "release 0.2.0 was rejected: ", id="rejected"),
    pytest.param("9.9.9", 404, "no verified release 9.9.9 (verified: 0.1.0)", id="unknown"),
])
def test_one_release_or_why_not(with_rejected: Index, version: str, status: int, fragment: str | None) -> None:
    body = render(with_rejected, ReleaseOne(version))
    answer = json.loads(body.data)
    assert (body.status, body.content_type) == (status, JSON)
    if fragment is None:
        assert answer["version"] == version and errors(answer, "manifest-release") == []
    else:
        assert fragment in answer["error"] and answer["parameter"] == "version"
        assert ("rejected" in answer) is (version == "0.2.0")


def test_no_verified_release_at_all(tmp_path: Path) -> None:
    answer = json.loads(render(build_index(DirectorySource(tmp_path).snapshot(), []), ReleaseOne("1.0")).data)
    assert answer["error"] == "no verified release 1.0 (verified: none)"


def test_choose_renders_the_choose_answer(fleet: Index) -> None:
    q = Choose("basert", "abi", "2")
    body = render(fleet, q)
    assert body.status == 200 and body.data == encode(choose(fleet, q))


@pytest.mark.parametrize("route", [Health(), "not a route"], ids=["health", "not-a-route"])
def test_what_is_not_rendered(fleet: Index, route: Any) -> None:
    with pytest.raises(TypeError, match="no rendering for"):
        render(fleet, route)


def test_the_page_lists_releases_rejections_and_answers_escaped(with_rejected: Index) -> None:
    body = render(with_rejected, Page())
    page = body.data.decode("utf-8")
    assert (body.status, body.content_type) == (200, HTML)
    assert '<a href="v1/releases/0.1.0.json">0.1.0</a>' in page
    assert "<td>&lt;b&gt;unsigned</td>" in page and "<b>" not in page
    assert '<a href="v1/choose/basert/abi/1.json">' in page and "/linux-x64.json\">" not in page
    for rid in registry.IDS:  # a runtime whose presentation asks no question has no choose answers (the default)
        assert (f"/v1/choose/{rid}/" in page) == bool(registry.presentation(rid).questions)


def test_the_page_without_keys_says_signatures_are_not_checked(tmp_path: Path, doc: dict[str, Any]) -> None:
    write_release(tmp_path, "r", vary(doc, "0.1.0"), None)
    page = render(build_index(DirectorySource(tmp_path).snapshot(), []), Page()).data.decode()
    assert "Trusted keys: none (signatures are not checked)" in page and "<td>not checked (no keys)</td>" in page


def test_drives_cells_one_per_runtime_and_a_dash_for_none(fleet: Index) -> None:
    abi_3, without_mlx, abi_1 = (fleet.release(v) for v in ("0.3.0", "0.10.0", "0.1.0"))
    assert abi_3 is not None and without_mlx is not None and abi_1 is not None
    cells = drives_cells(abi_3)
    assert len(cells) == len(registry.IDS) and "-" not in cells
    assert drives_cells(without_mlx)[registry.IDS.index("mlx")] == "-"
    basert = registry.IDS.index("basert")
    assert cells[basert] != drives_cells(abi_1)[basert]  # each cell is the release's own (ABI 3, ABI 1)


def _routes() -> list[Route]:
    return [Page(), ReleaseList(), ReleaseOne("0.1.0"), Choose("llamacpp", "build", "b11642")]


def test_the_same_index_answers_the_same_bytes(fleet: Index) -> None:
    assert [render(fleet, r) for r in _routes()] == [render(fleet, r) for r in _routes()]
