"""``runtime update`` and ``runtime repair``'s rules (runtime/upkeep), on values: what each asks
for, and why an update installs nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from superfluid.installer.home.upkeep import (
    first_known,
    nothing_to_update,
    repair_target,
    repair_wanted,
    same_archives,
    update_wanted,
)
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.receipt import Receipt, Source
from superfluid.runtime.planning import NotInstallable, Plan, PlanAsset


def receipt(version: str = "b100", backend: str = "cuda-12.4", **more: Any) -> Receipt:
    return Receipt(id="llamacpp", install=f"{version}-{backend}", version=version, backend=backend,
                   worker="bin/superfluid-worker-llamacpp", **more)


def plan(version: str, backend: str = "cuda-12.4") -> Plan:
    return Plan(id="llamacpp", version=version, backend=backend, assets=(), tested=True, chosen_by="tested",
                abi=None, why="tested")


@pytest.mark.parametrize(("backend", "family"), [("cuda-12.4", "cuda"), ("cpu", "cpu"), ("sycl_fp16", "sycl")])
def test_an_update_asks_for_the_newest_of_the_backend_family(backend: str, family: str) -> None:
    assert update_wanted(receipt(backend=backend)) == {"version": None, "backend": family, "from_": None,
                                                       "sha256": None}


#: what installs the newest release beside a default install that is newer, or a build of the user's own
BESIDE = Fix(("superfluid", "runtime", "install", "llamacpp", "--version", "b200"), "installs b200 beside it")
UPDATES = [
    pytest.param(receipt("b100"), plan("b200"), {"b100-cuda-12.4"}, None, id="newer"),
    pytest.param(receipt("b100"), plan("b200"), {"b100-cuda-12.4", "b200-cuda-12.4"},
                 ("llamacpp b200-cuda-12.4 is installed; nothing newer installs here for cuda", None), id="installed"),
    pytest.param(receipt("b300"), plan("b200"), {"b300-cuda-12.4"},
                 ("llamacpp CUR: it is b300, newer than b200, the newest that installs here; nothing to update",
                  BESIDE), id="current-is-newer"),
    pytest.param(receipt("custom"), plan("b200"), {"custom-cuda-12.4"},
                 ("llamacpp CUR: it is a build of your own, not one of a release; nothing to update", BESIDE),
                 id="own-build"),
    pytest.param(receipt("b200"), plan("b200", "cuda-13.0"), {"b200-cuda-12.4"}, None, id="same-build-other-backend"),
]


@pytest.mark.parametrize(("old", "first", "installed", "why"), UPDATES)
def test_nothing_to_update(old: Receipt, first: Plan, installed: set[str], why: tuple[str, Fix | None] | None) -> None:
    assert nothing_to_update("llamacpp", "CUR", old, first, installed) == why


def _no_default() -> str | None:
    return None


TARGETS = [
    pytest.param({"a": 1, "b": 2}, "b", lambda: "a", 2, id="current-wins"),
    pytest.param({"a": 1, "b": 2}, "gone", lambda: "a", 1, id="else-the-default"),
    pytest.param({"a": 1, "b": 2}, None, lambda: "b", 2, id="no-current"),
    pytest.param({"a": 1}, None, _no_default, 1, id="else-the-only-one"),
]


@pytest.mark.parametrize(("present", "current", "default", "chosen"), TARGETS)
def test_repair_target(present: dict[str, int], current: str | None, default: Any, chosen: int) -> None:
    assert repair_target("demo", present, current, default) == chosen


def test_the_default_is_asked_only_without_a_current() -> None:
    def default() -> str | None:
        raise AssertionError("asked")

    assert repair_target("demo", {"a": 1}, "a", default) == 1


@pytest.mark.parametrize(("present", "message"), [
    pytest.param({"a": 1, "b": 2}, "demo: several installs are broken (a, b) and none is the current one",
                 id="several"),
    pytest.param({}, "demo is not installed", id="none"),
])
def test_repair_target_refused(present: dict[str, int], message: str) -> None:
    with pytest.raises(NotInstallable, match=message.replace("(", r"\(").replace(")", r"\)")):
        repair_target("demo", present, None, _no_default)


WANTED = [
    pytest.param("b100-cpu", receipt("b100", "cpu", tested=True), None,
                 {"version": "b100", "backend": "cpu", "untested": False, "from_": None, "sha256": None},
                 id="from-the-receipt"),
    pytest.param("b100-cpu", receipt("b100", "cpu"), None,
                 {"version": "b100", "backend": "cpu", "untested": True, "from_": None, "sha256": None},
                 id="untested-stays-untested"),
    pytest.param("b100-cpu", receipt("b100", "cpu", chosen_by="from", sources=(Source("file:///x.tgz", "ab" * 32),)),
                 None, {"version": "b100", "backend": "cpu", "untested": True, "from_": "file:///x.tgz",
                        "sha256": "ab" * 32}, id="from-the-same-source"),
    pytest.param("custom-cpu", receipt("custom", "cpu", chosen_by="from", sources=(Source("file:///x.tgz"),)),
                 None, {"version": None, "backend": "cpu", "untested": True, "from_": "file:///x.tgz",
                        "sha256": None}, id="a-build-of-ones-own"),
    pytest.param("b100-cuda-13.4", None, "runtime.json does not exist",
                 {"version": "b100", "backend": "cuda-13.4", "untested": True, "from_": None, "sha256": None},
                 id="from-the-name"),
]


@pytest.mark.parametrize(("name", "old", "problem", "wanted"), WANTED)
def test_repair_wanted(name: str, old: Receipt | None, problem: str | None, wanted: dict[str, Any]) -> None:
    assert repair_wanted("llamacpp", name, old, problem) == wanted


def test_a_name_that_says_no_backend_is_not_repaired() -> None:
    with pytest.raises(NotInstallable, match="llamacpp odd: its receipt is broken; its name does not say") as e:
        repair_wanted("llamacpp", "odd", None, "its receipt is broken")
    assert [f.argv for f in e.value.fixes] == [("superfluid", "runtime", "remove", "llamacpp", "odd")]


A, B = "a" * 64, "b" * 64


def asset(sha256: str | None, source: str = "sidecar") -> PlanAsset:
    return PlanAsset(name="x.tar.gz", url="https://h/x.tar.gz", sha256=sha256, size=None, digest_source=source)


@pytest.mark.parametrize(("assets", "known"), [
    pytest.param([(A, "sidecar")], True, id="digest-known"),
    pytest.param([(A, "sidecar"), (B, "pinned")], True, id="all-known"),
    pytest.param([(None, "sidecar")], False, id="digest-not-known-yet"),
    pytest.param([(A, "sidecar"), (None, "from")], False, id="one-unknown"),
    pytest.param([], False, id="no-archive"),
])
def test_first_known_is_the_plan_whose_archives_are_all_known(assets: list[tuple[str | None, str]],
                                                              known: bool) -> None:
    first = replace(plan("b200"), assets=tuple(asset(d, s) for d, s in assets))
    assert (first_known([first]) is first) is known


def test_first_known_skips_a_plan_of_an_absent_archive() -> None:
    absent = replace(plan("b200"), assets=(asset(A, "absent"),))
    there = replace(plan("b100"), assets=(asset(B),))
    assert first_known([absent, there]) is there and first_known([absent]) is None


@pytest.mark.parametrize(("digests", "sources", "tested", "same"), [
    pytest.param((A,), (A,), True, True, id="same-archive"),
    pytest.param((A,), (A, B), True, True, id="among-the-recorded"),
    pytest.param((A, B), (A,), True, False, id="one-not-recorded"),
    pytest.param((B,), (A,), True, False, id="another-archive"),
    pytest.param((A,), (A,), False, False, id="recorded-untested"),
])
def test_same_archives(digests: tuple[str, ...], sources: tuple[str, ...], tested: bool, same: bool) -> None:
    first = replace(plan("b100"), assets=tuple(asset(d) for d in digests))
    there = receipt(sources=[Source(f"https://h/{d[:4]}", d) for d in sources], tested=tested)
    assert same_archives(first, there) is same
