"""``manifest/choose``: which verified releases drive an engine, newest first, each with why. The
answers are the installer's rules' answers (the ABI rule, the tested-build list, version ordering),
pinned to the same functions; the static export holds every value a release names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from superfluid.manifest.choose import choose, choose_routes
from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey
from superfluid.manifest.routes import PLATFORMS, Choose
from superfluid.manifest.sources import DirectorySource
from superfluid.runtime.kernel.schema import errors
from tests.manifest.release_folders import vary, write_release


@pytest.mark.parametrize(("q", "drives", "by"), [
    pytest.param(Choose("basert", "abi", "1"), ["0.1.0"], "abi", id="abi-1"),
    pytest.param(Choose("basert", "abi", "2"), ["0.10.0", "0.2.0"], "abi", id="abi-2-newest-first"),
    pytest.param(Choose("basert", "abi", "7"), [], None, id="abi-nobody-drives"),
    pytest.param(Choose("basert", "version", "0.3.0"), ["0.1.0"], "line", id="unnumbered-of-the-line"),
    pytest.param(Choose("basert", "version", "0.03.9"), ["0.1.0"], "line", id="unnumbered-line-spelled-oddly"),
    pytest.param(Choose("basert", "version", "0.2.6"), [], None, id="unnumbered-off-the-line"),
    pytest.param(Choose("llamacpp", "build", "b11642"), ["0.2.0", "0.1.0"], "tested", id="build-tested-twice"),
    pytest.param(Choose("llamacpp", "build", "b11739"), ["0.10.0", "0.3.0"], "tested", id="build-newest-first"),
    pytest.param(Choose("llamacpp", "build", "b11549"), [], None, id="build-untested"),
    pytest.param(Choose("mlx", "version", "0.32.2"), ["0.2.0", "0.1.0"], "tested", id="mlx"),
    pytest.param(Choose("mlx", "version", "0.32.2", "macos-arm64"), ["0.2.0", "0.1.0"], "tested",
                 id="mlx-on-its-platform"),
    pytest.param(Choose("mlx", "version", "0.32.2", "linux-x64"), [], None, id="mlx-not-on-linux"),
])
def test_choose(fleet: Index, q: Choose, drives: list[str], by: str | None) -> None:
    answer = choose(fleet, q)
    assert errors(answer, "manifest-choose") == []
    assert [r["version"] for r in answer["drives"]] == drives
    assert all(r["by"] == by for r in answer["drives"])
    assert sorted(r["version"] for r in answer["drives"] + answer["others"]) == ["0.1.0", "0.10.0", "0.2.0", "0.3.0"]
    assert all(r["why"] and r["short"] for r in answer["drives"] + answer["others"])


@pytest.mark.parametrize(("q", "version", "why"), [
    (Choose("basert", "abi", "2"), "0.1.0", "a baseRT library states ABI 2; this superfluid drives ABI 1"),
    (Choose("basert", "abi", "2"), "0.2.0", "a baseRT library states ABI 2, the ABI this superfluid drives"),
    (Choose("basert", "version", "0.3.0"), "0.1.0",
     "baseRT 0.3.0 states no ABI number and is of the 0.3.x line, which carries ABI 1"),
    (Choose("basert", "version", "0.3.0"), "0.2.0", "baseRT 0.3.0 states no ABI number; this superfluid drives "
                                                   "ABI 2, and no unnumbered release carries ABI 2"),
    (Choose("llamacpp", "build", "b11549"), "0.1.0",
     "b11549 is not a build superfluid-toolchain 0.1.0 was tested against (tested: b11642, b11284); it installs only "
     "with --untested"),
    (Choose("mlx", "version", "0.32.2"), "0.10.0", "superfluid-toolchain 0.10.0 ships no mlx adapter"),
    (Choose("mlx", "version", "0.32.2", "linux-x64"), "0.1.0",
     "superfluid-toolchain 0.1.0 runs mlx on macos-arm64 only"),
])
def test_each_answer_says_why(fleet: Index, q: Choose, version: str, why: str) -> None:
    answer = choose(fleet, q)
    assert next(r for r in answer["drives"] + answer["others"] if r["version"] == version)["why"] == why


@pytest.mark.parametrize("abi", [1, 2, 3, 4])
@pytest.mark.parametrize("version", [None, "0.2.6", "0.3.0", "0.3.7", "0.4.0"])
def test_basert_answers_are_the_abi_rules(fleet: Index, abi: int, version: str | None) -> None:
    """Pinned to the function the loader and the planner call: the service holds no copy of it."""
    from superfluid.runtime.basert.abi import abi_verdict

    q = Choose("basert", "abi", str(abi)) if version is None else Choose("basert", "version", version)
    answer = choose(fleet, q)
    for row in answer["drives"] + answer["others"]:
        part = fleet.release(row["version"]).compat["runtimes"]["basert"]  # type: ignore[union-attr]
        rule = abi_verdict(version, None if version else abi, drives=part["requires"]["abi"],
                           line=part["unnumbered_line"])
        assert (row["by"], row["short"], row["why"]) == (rule.by, rule.short, rule.why)


def test_llamacpp_answers_are_the_installers_tested_builds(tmp_path: Path, doc: dict[str, Any], key: SecretKey,
                                                           trusted: list[TrustedKey]) -> None:
    """A release made from this checkout drives exactly the builds its llama.cpp adapter installs
    without --untested (the recipe's tested list, the installer's rule)."""
    from superfluid.runtime.llamacpp.recipe import tested

    write_release(tmp_path, "this", vary(doc, "0.1.0"), key)
    index = build_index(DirectorySource(tmp_path).snapshot(), trusted)
    installs = {b.version for b in tested()}
    for build in sorted(installs | {"b11284", "b11312", "b11434", "b11549", "b11642", "b11669", "b11739"}):
        driven = bool(choose(index, Choose("llamacpp", "build", build))["drives"])
        assert driven is (build in installs), build


def test_static_paths_cover_every_value_a_release_names(fleet: Index) -> None:
    paths = {q.path for q in choose_routes(fleet)}
    for expected in ("/v1/choose/basert/abi/1.json", "/v1/choose/basert/abi/3/linux-x64.json",
                     "/v1/choose/basert/version/0.3.0.json", "/v1/choose/llamacpp/build/b11669.json",
                     "/v1/choose/mlx/version/0.33.0/macos-arm64.json"):
        assert expected in paths
    assert "/v1/choose/basert/abi/7.json" not in paths


@pytest.mark.parametrize(("q", "asked", "question"), [
    pytest.param(Choose("basert", "abi", "2"), {"runtime": "basert", "abi": 2, "platform": None}, "basert ABI 2",
                 id="a-number-is-a-number"),
    pytest.param(Choose("basert", "version", "0.3.0", "linux-x64"),
                 {"runtime": "basert", "version": "0.3.0", "platform": "linux-x64"}, "on linux-x64",
                 id="a-version-is-a-string"),
    pytest.param(Choose("llamacpp", "build", "b11642"), {"runtime": "llamacpp", "build": "b11642", "platform": None},
                 "llamacpp build b11642", id="a-build-is-a-string"),
])
def test_the_answer_says_what_was_asked(fleet: Index, q: Choose, asked: dict[str, Any], question: str) -> None:
    answer = choose(fleet, q)
    assert answer["asked"] == asked and answer["path"] == q.path
    assert question in answer["question"]


def test_each_row_names_the_release_and_its_path(fleet: Index) -> None:
    answer = choose(fleet, Choose("basert", "abi", "2"))
    row = answer["drives"][0]
    assert (row["version"], row["name"], row["path"]) == ("0.10.0", "superfluid-toolchain", "/v1/releases/0.10.0.json")
    assert answer["rejected"] == []


def test_a_release_without_the_runtime_is_among_the_others(fleet: Index) -> None:
    [row] = [r for r in choose(fleet, Choose("mlx", "version", "0.33.0"))["others"] if r["version"] == "0.10.0"]
    assert (row["by"], row["short"]) == (None, "no mlx")


def test_each_named_value_is_routed_on_no_platform_and_on_each(fleet: Index) -> None:
    routes = choose_routes(fleet)
    values = sorted({(q.runtime, q.kind, q.value) for q in routes})
    assert len(routes) == len(values) * (1 + len(PLATFORMS)) == len(set(routes))
    assert {q.platform for q in routes if (q.runtime, q.kind, q.value) == values[0]} == {None, *PLATFORMS}
    assert ("basert", "abi", "3") in values and ("llamacpp", "build", "b11284") in values


def test_no_verified_release_no_routes(tmp_path: Path) -> None:
    index = build_index(DirectorySource(tmp_path).snapshot(), [])
    assert choose_routes(index) == []
    answer = choose(index, Choose("basert", "abi", "1"))
    assert (answer["drives"], answer["others"], answer["rejected"]) == ([], [], [])
