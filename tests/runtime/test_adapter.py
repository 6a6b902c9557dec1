"""``runtime/adapter``: the base class's rules every adapter inherits (the recipe's repository, the
compat part a request plans for, the probe's verdict with the adapter's switches) and the defaults a new
engine gets; how a runtime is shown is tests/runtime/test_presentation.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import pytest

from superfluid.runtime import registry
from superfluid.runtime.adapter import Adapter, ModelFacts, built_by_of, compat_part, load_recipe
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.formats import reads
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.options import Option
from superfluid.runtime.planning import ForRelease, Listing, NotInstallable, Plan, PlanAsset, Request
from superfluid.runtime.probe import ProbeRefused, judge_probe


class Bare(Adapter):
    """An adapter that declares only what it must."""

    id = "bare"
    package = "bare_pkg"

    def compat(self) -> dict[str, Any]:
        return {"requires": {"abi": 7}}

    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return []

    def options(self) -> list[Option]:
        return []


def bare(recipe: dict[str, Any] | None = None, cls: type[Adapter] = Bare) -> Adapter:
    adapter = cls()
    adapter.__dict__["recipe"] = recipe or {}  # the cached property, filled without a package
    return adapter


# --- the recipe -----------------------------------------------------------------------------------------

@pytest.fixture
def recipe_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable package ``sf_recipe_pkg`` (a fresh one per test) whose recipe.json the test writes."""
    folder = tmp_path / "sf_recipe_pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sf_recipe_pkg", raising=False)
    return folder / "recipe.json"


def test_a_recipe_is_read(recipe_package: Path) -> None:
    recipe_package.write_text(json.dumps({"releases": "https://api.example/repos/o/n/releases"}))
    assert load_recipe("sf_recipe_pkg") == {"releases": "https://api.example/repos/o/n/releases"}


@pytest.mark.parametrize("content", [
    pytest.param(None, id="absent"),
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b"[1, 2]", id="an-array"),
    pytest.param(b'"text"', id="a-string"),
    pytest.param(b'{"a": "\xff"}', id="not-utf8"),
    pytest.param(b" " * (4 << 20) + b"{}", id="over-4-mib"),
])
def test_a_bad_recipe_is_a_bad_file(recipe_package: Path, content: bytes | None) -> None:
    if content is not None:
        recipe_package.write_bytes(content)
    with pytest.raises(BadFile) as e:
        load_recipe("sf_recipe_pkg")
    assert e.value.path == str(recipe_package)


@pytest.mark.parametrize("ident", registry.IDS)
def test_every_shipped_recipe_is_an_object(ident: str) -> None:
    adapter = registry.get(ident)
    assert isinstance(adapter.recipe, dict) and adapter.recipe


# --- the recipe's repository ------------------------------------------------------------------------------

@pytest.mark.parametrize(("recipe", "repo"), [
    pytest.param({"releases": "https://api.example/repos/basecompute/baseRT/releases"}, "basecompute/baseRT",
                 id="releases"),
    pytest.param({"api": "https://api.example/repos/ggml-org/llama.cpp/releases?per_page=100"}, "ggml-org/llama.cpp",
                 id="api"),
    pytest.param({"releases": "https://x/repos/a/b/releases", "api": "https://x/repos/c/d/releases"}, "a/b",
                 id="releases-before-api"),
    pytest.param({"releases": None, "api": "https://x/repos/c/d/releases"}, "c/d", id="null-releases"),
])
def test_the_repository_the_recipe_names(recipe: dict[str, Any], repo: str) -> None:
    assert bare(recipe).repo == repo


@pytest.mark.parametrize("recipe", [
    pytest.param({}, id="none"),
    pytest.param({"releases": "https://x/releases"}, id="no-repos-path"),
    pytest.param({"releases": "https://x/repos/a/releases"}, id="owner-alone"),
    pytest.param({"releases": "https://x/repos/a b/c/releases"}, id="space-in-owner"),
    pytest.param({"homepage": "https://x/repos/a/b/releases"}, id="another-key"),
])
def test_no_repository_is_not_installable(recipe: dict[str, Any]) -> None:
    """The words docs/adapters.md promises for an engine without an installer, and why."""
    with pytest.raises(NotInstallable) as caught:
        _ = bare(recipe).repo
    assert caught.value.message == ("this superfluid has no installer for the bare runtime: its recipe names no "
                                    "releases repository")


# --- the compat part a request plans for -------------------------------------------------------------------

FOR = ForRelease("superfluid-9.0", "9.0", "c" * 64, runtimes={"bare": {"requires": {"abi": 9}}})


def test_compat_part_is_ours_without_for() -> None:
    assert compat_part(bare(), Request(id="bare")) == {"requires": {"abi": 7}}


def test_compat_part_is_the_for_releases() -> None:
    assert compat_part(bare(), Request(id="bare", for_=FOR)) == {"requires": {"abi": 9}}


@pytest.mark.parametrize("runtimes", [
    pytest.param({}, id="absent"),
    pytest.param({"bare": None}, id="null"),
    pytest.param({"bare": ["x"]}, id="not-an-object"),
    pytest.param({"other": {"requires": {}}}, id="another-runtime"),
])
def test_a_for_release_that_drives_none_of_it(runtimes: dict[str, Any]) -> None:
    req = Request(id="bare", for_=ForRelease("superfluid-9.0", "9.0", "c" * 64, runtimes=runtimes))
    with pytest.raises(NotInstallable, match="runtimes.bare"):
        compat_part(bare(), req)


def _plan(**kw: Any) -> Plan:
    fields: dict[str, Any] = dict(id="bare", version="1.0", backend="cpu", assets=(), tested=True,
                                  chosen_by="tested", abi=None, why="test")
    fields.update(kw)
    return Plan(**fields)


class Planning(Bare):
    """Plans one build for whatever part it is given, and records that part."""

    parts: ClassVar[list[Mapping[str, Any]]] = []

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        self.parts.append(compat_part)
        return [_plan(why=f"abi {compat_part['requires']['abi']}")]


def test_plan_stamps_what_it_was_made_for() -> None:
    adapter = bare(cls=Planning)
    host = Host(os="linux", arch="x64")
    (ours,) = adapter.plan(Request(id="bare"), host)
    (theirs,) = adapter.plan(Request(id="bare", for_=FOR), host)
    assert (ours.why, ours.made_for) == ("abi 7", None)
    assert (theirs.why, theirs.made_for) == ("abi 9", FOR.to_json())


# --- who builds its assets -----------------------------------------------------------------------------------

OURS = {"repository": "o/bare", "workflow": ".github/workflows/release.yml", "ref": "refs/tags/v*"}
RELEASES = "https://api.example/repos/o/bare/releases"


@pytest.mark.parametrize(("recipe", "part", "built_by"), [
    pytest.param({"built_by": OURS, "releases": RELEASES}, None, OURS, id="the-recipe-s"),
    pytest.param({"built_by": {"repository": "o/bare"}}, None, {"repository": "o/bare", "workflow": None, "ref": None},
                 id="workflow-and-ref-left-open"),
    pytest.param({"releases": RELEASES}, None, {"repository": "o/bare", "workflow": None, "ref": None},
                 id="any-workflow-of-its-releases-repository"),
    pytest.param({"built_by": {"workflow": "release.yml"}, "releases": RELEASES}, None,
                 {"repository": "o/bare", "workflow": None, "ref": None}, id="one-with-no-repository-is-none"),
    pytest.param({"built_by": OURS}, {"built_by": {"repository": "fork/bare", "ref": None}},
                 {"repository": "fork/bare", "workflow": None, "ref": None}, id="a-for-release-s-before-the-recipe-s"),
    pytest.param({"built_by": OURS}, {"requires": {"abi": 9}}, OURS, id="an-older-for-release-names-none"),
    pytest.param({}, None, None, id="no-repository-no-identity"),
])
def test_who_builds_its_assets(recipe: dict[str, Any], part: Mapping[str, Any] | None,
                               built_by: dict[str, Any] | None) -> None:
    assert built_by_of(bare(recipe), part) == built_by


def test_a_runtime_with_no_release_archives_names_no_identity() -> None:
    with pytest.raises(NotInstallable):
        _ = registry.get("mlx").repo
    assert built_by_of(registry.get("mlx")) is None
    assert built_by_of(registry.get("basert")) == registry.get("basert").compat()["built_by"]


class Retrying(Planning):
    """Plans one build, and its retry (the same build with its CUDA runtime)."""

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        return [_plan(retry=_plan(backend="cuda-12.4"))]


def test_plan_stamps_who_builds_its_assets_on_each_plan_and_its_retry() -> None:
    adapter = bare({"built_by": OURS}, cls=Retrying)
    host = Host(os="linux", arch="x64")
    (ours,) = adapter.plan(Request(id="bare"), host)
    assert ours.built_by == OURS and ours.retry is not None and ours.retry.built_by == OURS
    assert ours.to_json()["built_by"] == OURS
    fork = {"repository": "fork/bare", "workflow": None, "ref": None}
    for_fork = ForRelease("superfluid-9.0", "9.0", "c" * 64, runtimes={"bare": {"built_by": fork}})
    (theirs,) = adapter.plan(Request(id="bare", for_=for_fork), host)
    assert theirs.built_by == fork and theirs.retry is not None and theirs.retry.built_by == fork
    (by_hand,) = adapter.plan(Request(id="bare", from_="/tmp/engine.tar.gz"), host)
    assert by_hand.built_by is None and "built_by" not in by_hand.to_json()


def test_the_default_installs_nothing() -> None:
    with pytest.raises(NotInstallable, match="no installer for the bare runtime"):
        bare().plan(Request(id="bare"), Host(os="linux", arch="x64"))


# --- the probe's verdict, with the adapter's switches ---------------------------------------------------------

REPORT = {"available": True, "runtime": {"version": "2.0"}, "devices": [{"backend": "CPU"}], "layout": "v2",
          "abi": 1}


class Strict(Bare):
    holds_version = True
    receipt_keys = ("layout",)


class Deviceless(Bare):
    needs_device = False


@pytest.mark.parametrize(("cls", "plan", "refused"), [
    pytest.param(Bare, _plan(version="1.0"), False, id="default-ignores-the-version"),
    pytest.param(Strict, _plan(version="1.0"), True, id="holds-version-refuses-another"),
    pytest.param(Strict, _plan(version="2.0"), False, id="holds-version-same"),
    pytest.param(Strict, _plan(version="custom"), False, id="holds-version-custom"),
    pytest.param(Bare, _plan(backend="cuda-12.4"), True, id="default-needs-a-device"),
    pytest.param(Deviceless, _plan(backend="cuda-12.4"), False, id="needs-no-device"),
    pytest.param(Bare, _plan(abi=2), True, id="abi-of-another-release"),
])
def test_judge_probe_is_the_shared_rule_with_the_adapters_switches(cls: type[Adapter], plan: Plan,
                                                                     refused: bool) -> None:
    adapter = bare(cls=cls)
    same = dict(holds_version=cls.holds_version, needs_device=cls.needs_device, keeps=cls.receipt_keys)
    if refused:
        with pytest.raises(ProbeRefused):
            adapter.judge_probe(plan, REPORT, untested=False)
        with pytest.raises(ProbeRefused):
            judge_probe(plan, REPORT, untested=False, **same)  # type: ignore[arg-type]
        return
    got = adapter.judge_probe(plan, REPORT, untested=False)
    assert got == judge_probe(plan, REPORT, untested=False, **same)  # type: ignore[arg-type]
    assert got.extra == ({"layout": "v2"} if cls is Strict else {})


# --- the defaults a new engine gets ------------------------------------------------------------------------------

def test_the_defaults() -> None:
    a = bare()
    assert a.probe_argv("/s/lib") == ["check", "--lib", "/s/lib"]
    assert a.model_facts() == ModelFacts(formats=[], tokenizer={"from": "engine"}, capabilities={})
    assert a.nothing_to_load(read({}), "w") is None and a.presentation_from is None
    assert (a.linked, a.holds_version, a.needs_device, a.receipt_keys, a.environment) == (False, False, True, (), ())
    with pytest.raises(NotImplementedError, match="not linked"):
        a.check([], read({}))


def test_at_most_twelve_methods() -> None:
    """Declarations, the planner and the probe judge (issue 43); how it is shown is its Presentation's."""
    own = [name for name, value in vars(Adapter).items()
           if callable(value) or isinstance(value, (property, cached_property))]
    assert len(own) <= 12, own


def test_an_asset_free_plan_is_still_a_plan() -> None:
    """The helper above builds real plans (keyword-only), the shape the rules receive."""
    asset = PlanAsset(name="a.tar.gz", url="https://x/a.tar.gz", sha256=None, size=None, digest_source="absent")
    assert _plan(assets=(asset,)).install == "1.0-cpu"


# --- what its check reports, declared (the worker contract: runtime/contract.py) -----------------------------

@pytest.mark.parametrize(("ident", "aliases", "tokenizer", "kv_bits"), [
    pytest.param("basert", [], {"from": "engine"}, True, id="basert"),
    pytest.param("llamacpp", ["llama.cpp", "llama-cpp"], {"from": "engine"}, "no such knob", id="llamacpp"),
    pytest.param("mlx", [], {"from": "huggingface"}, "no such knob", id="mlx"),
])
def test_the_shipped_declarations(ident: str, aliases: list[str], tokenizer: dict[str, str],
                                  kv_bits: bool | str) -> None:
    facts = registry.get(ident).model_facts()
    assert registry.aliases_of(ident) == aliases and facts.tokenizer == tokenizer
    record = facts.capabilities
    assert record["descriptor_version"] == 1 and record["workload"]["causal_generation"] is True
    assert record["load"]["kv_bits"] is True if kv_bits is True else record["load"]["kv_bits"].startswith(kv_bits)


def test_its_formats_make_the_gate(tmp_path: Path) -> None:
    formats = registry.get("llamacpp").model_facts().formats
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03")
    (tmp_path / "notes.txt").write_text("hello")
    assert reads(formats, str(tmp_path / "m.gguf")) is None
    assert reads(formats, str(tmp_path / "notes.txt")) == \
        f"it reads a GGUF file, and {tmp_path / 'notes.txt'} is not one"
    assert reads(formats, str(tmp_path / "gone")) == f"{tmp_path / 'gone'}: no such file or directory"
