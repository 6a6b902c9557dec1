"""``runtime/llamacpp/planner``: the recipe's recorded needs judged before any download (issue 31): a
plan this host does not meet is shown with its reason and skipped; ``versions`` lists each."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.hostfacts.needs import Needs
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.llamacpp.adapter import ADAPTER
from superfluid.runtime.llamacpp.planner import plan, recorded_needs
from superfluid.runtime.llamacpp.recipe import load
from superfluid.runtime.planning import Request, first_published

LIBS = {"libc.so.6": "/lib/libc.so.6", "libstdc++.so.6": "/lib/libstdc++.so.6"}
DEBIAN12_ARM = Host(os="linux", arch="arm64", glibc="2.36", libc="glibc", glibcxx="3.4.30", libraries=LIBS)
UBUNTU24_ARM = Host(os="linux", arch="arm64", glibc="2.39", libc="glibc", glibcxx="3.4.33", libraries=LIBS)
RHEL8 = Host(os="linux", arch="x64", glibc="2.28", libc="glibc", glibcxx="3.4.25", libraries=LIBS)
DEBIAN12 = Host(os="linux", arch="x64", glibc="2.36", libc="glibc", glibcxx="3.4.30", libraries=LIBS)
ALPINE = Host(os="linux", arch="x64", libc="musl", glibcxx="3.4.32", libraries=LIBS)


def test_upstream_s_needs_are_recorded_for_the_tested_linux_archives() -> None:
    recipe = load()
    assert recorded_needs(recipe, "b11642", "llama-b11642-bin-ubuntu-x64.tar.gz") == Needs(glibc="2.34",
                                                                                           glibcxx="3.4.30")
    assert recorded_needs(recipe, "b11284", "llama-b11284-bin-ubuntu-arm64.tar.gz") == Needs(glibc="2.38",
                                                                                             glibcxx="3.4.32")
    vulkan = recorded_needs(recipe, "b11642", "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz")
    assert vulkan is not None and vulkan.libraries == ("libvulkan.so.1",)
    assert recorded_needs(recipe, "b11642", "llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz") is None  # measured later
    assert recorded_needs(recipe, "b11642", "llama-b11642-bin-macos-arm64.tar.gz") is None
    assert recorded_needs(recipe, "b1", "llama-b1-bin-ubuntu-x64.tar.gz") is None


@pytest.mark.parametrize(("host", "refused"), [
    pytest.param(DEBIAN12, [None, None], id="debian-12-x64"),
    pytest.param(UBUNTU24_ARM, [None, None], id="ubuntu-24.04-arm64"),
    pytest.param(DEBIAN12_ARM, ["llama-b11642-bin-ubuntu-arm64.tar.gz needs GLIBC_2.38; this host has glibc 2.36: "
                                "this build was made for a newer distribution; llama-b11642-bin-ubuntu-arm64.tar.gz "
                                "needs GLIBCXX_3.4.32; this host's libstdc++ defines GLIBCXX_3.4.30 at most: this "
                                "build was made for a newer distribution", "llama-b11284"], id="debian-12-arm64"),
    pytest.param(RHEL8, ["llama-b11642-bin-ubuntu-x64.tar.gz needs GLIBC_2.34; this host has glibc 2.28",
                         "llama-b11284"], id="rhel-8"),
    pytest.param(ALPINE, ["llama-b11642-bin-ubuntu-x64.tar.gz needs glibc (GLIBC_2.34); this host's C library is musl",
                          "llama-b11284"], id="alpine"),
    pytest.param(Host(os="linux", arch="arm64"), [None, None], id="a-host-described"),
])
def test_a_plan_the_host_does_not_meet_is_refused_before_download(host: Host, refused: list[str | None]) -> None:
    plans = plan(Request(id="llamacpp"), load(), host)
    assert [p.install for p in plans] == ["b11642-cpu", "b11284-cpu"]
    for p, said in zip(plans, refused, strict=True):
        assert (p.refused is None) is (said is None)
        assert said is None or (p.refused or "").startswith(said)
        assert p.to_json().get("refused") == p.refused and p.to_json()["needs"] == (p.needs.to_json() if p.needs
                                                                                     else None)
    assert (first_published(plans) is None) is all(refused)


def test_the_vulkan_build_named_without_its_loader_is_refused() -> None:
    host = Host(os="linux", arch="x64", glibc="2.36", libc="glibc", glibcxx="3.4.30", vulkan=False, libraries=LIBS)
    plans = plan(Request(id="llamacpp", backend="vulkan"), load(), host)
    assert plans[0].refused == ("llama-b11642-bin-ubuntu-vulkan-x64.tar.gz needs libvulkan.so.1, which is on none of "
                                "this host's library paths")
    found = Host(os="linux", arch="x64", glibc="2.36", libc="glibc", libraries={**LIBS,
                                                                                "libvulkan.so.1": "/usr/lib64/x"})
    assert plan(Request(id="llamacpp", backend="vulkan"), load(), found)[0].refused is None
    stated = Host(os="linux", arch="x64", glibc="2.36", libc="glibc", vulkan=True, libraries=LIBS)  # a driver stated
    assert plan(Request(id="llamacpp", backend="vulkan"), load(), stated)[0].refused is None


def _with_needs(needs: Any) -> dict[str, Any]:
    recipe = copy.deepcopy(load())
    for asset in recipe["tested"][0]["assets"]:
        if asset["name"] == "llama-b11642-bin-ubuntu-vulkan-x64.tar.gz":
            asset["needs"] = needs
    return recipe


def test_bad_recorded_needs_are_a_bad_recipe() -> None:
    with pytest.raises(BadFile, match="the llama.cpp recipe .*needs.glibc must be a version"):
        plan(Request(id="llamacpp", backend="vulkan"), _with_needs({"glibc": "new"}), DEBIAN12)


def test_versions_lists_the_refused_plans_and_installs_only_a_met_one() -> None:
    rows = {r["version"]: r for r in ADAPTER.versions(DEBIAN12_ARM, ())}
    assert rows["b11642"]["installs"].startswith("llama-b11642-bin-ubuntu-arm64.tar.gz needs GLIBC_2.38")
    assert rows["b11642"]["install"] is None
    assert rows["b11642"]["refused"][0]["install"] == "b11642-cpu"
    vulkan = Host(os="linux", arch="x64", glibc="2.28", libc="glibc", vulkan=True, libraries=LIBS)
    rows = {r["version"]: r for r in ADAPTER.versions(vulkan, ())}
    assert rows["b11642"]["installs"] is not True and [x["install"] for x in rows["b11642"]["refused"]] == [
        "b11642-vulkan", "b11642-cpu"]
    fine = {r["version"]: r for r in ADAPTER.versions(DEBIAN12, ())}
    assert fine["b11642"]["installs"] is True and "refused" not in fine["b11642"]
