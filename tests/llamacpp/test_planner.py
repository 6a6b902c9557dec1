"""llama.cpp planner: recipe + host + request -> ordered plans (SPEC §4.2), one table per rule."""

from __future__ import annotations

import pytest

from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.llamacpp.adapter import ADAPTER
from superfluid.runtime.llamacpp.planner import cuda_major_for_driver, plan, plan_build
from superfluid.runtime.planning import DigestConflict, Request
from superfluid.runtime.planning import NotInstallable as PlanRefused
from tests.memory_listing import Asset, MemoryListing, Release


def Want(**kw: object) -> Request:  # noqa: N802 (reads as the request it builds)
    return Request.parse("llamacpp", **kw)  # type: ignore[arg-type]

RECIPE = ADAPTER.recipe


@pytest.mark.parametrize(("driver", "cuda"), [
    pytest.param("580.95.05", 13, id="580-cuda13"), pytest.param("590.1", 13, id="590-cuda13"),
    pytest.param("579.9", 12, id="579-cuda12"), pytest.param("525.60.13", 12, id="525-cuda12"),
    pytest.param("470.1", None, id="470-none"), pytest.param(None, None, id="no-driver"),
    pytest.param("garbage", None, id="unparsable"),
])
def test_driver_major_bounds_cuda(driver: str | None, cuda: int | None) -> None:
    assert cuda_major_for_driver(driver) == cuda


def _installs(host: Host, want: Want | None = None) -> list[tuple[str, list[str]]]:
    return [(p.install, [a.name for a in p.assets]) for p in plan_build(want or Want(), RECIPE, host)]


@pytest.mark.parametrize(("host", "expected"), [
    pytest.param(Host(os="linux", arch="x64"), [("b11642-cpu", ["llama-b11642-bin-ubuntu-x64.tar.gz"])],
                 id="linux-cpu-only"),
    pytest.param(Host(os="linux", arch="x64", nvidia_driver="580.95.05"), [
        ("b11642-cuda-13.4", ["llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz",
                              "cudart-llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz"]),
        ("b11642-cpu", ["llama-b11642-bin-ubuntu-x64.tar.gz"])], id="driver-580-no-runtime-adds-cudart"),
    pytest.param(Host(os="linux", arch="x64", nvidia_driver="580.95.05", cuda_runtime=13), [
        ("b11642-cuda-13.4", ["llama-b11642-bin-ubuntu-cuda-13.4-x64.tar.gz"]),
        ("b11642-cpu", ["llama-b11642-bin-ubuntu-x64.tar.gz"])], id="driver-580-system-runtime"),
    pytest.param(Host(os="linux", arch="x64", nvidia_driver="535.54", cuda_runtime=13), [
        ("b11642-cuda-12.8", ["llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz",
                              "cudart-llama-b11642-bin-ubuntu-cuda-12.8-x64.tar.gz"]),
        ("b11642-cpu", ["llama-b11642-bin-ubuntu-x64.tar.gz"])], id="driver-535-cuda12-runtime-13-is-not-12"),
    pytest.param(Host(os="linux", arch="x64", nvidia_driver="470.1", rocm=True, vulkan=True), [
        ("b11642-rocm-10.0", ["llama-b11642-bin-ubuntu-rocm-10.0-x64.tar.gz"]),
        ("b11642-vulkan", ["llama-b11642-bin-ubuntu-vulkan-x64.tar.gz"]),
        ("b11642-cpu", ["llama-b11642-bin-ubuntu-x64.tar.gz"])], id="old-driver-then-rocm-vulkan-cpu"),
    pytest.param(Host(os="linux", arch="arm64", nvidia_driver="580.1", vulkan=True), [
        ("b11642-cuda-13.4", ["llama-b11642-bin-ubuntu-cuda-13.4-arm64.tar.gz",
                              "cudart-llama-b11642-bin-ubuntu-cuda-13.4-arm64.tar.gz"]),
        ("b11642-vulkan", ["llama-b11642-bin-ubuntu-vulkan-arm64.tar.gz"]),
        ("b11642-cpu", ["llama-b11642-bin-ubuntu-arm64.tar.gz"])], id="linux-arm64"),
    pytest.param(Host(os="macos", arch="arm64"), [("b11642-metal", ["llama-b11642-bin-macos-arm64.tar.gz"])],
                 id="macos-metal"),
    pytest.param(Host(os="macos", arch="x64"), [("b11642-cpu", ["llama-b11642-bin-macos-x64.tar.gz"])],
                 id="macos-intel-cpu"),
])
def test_backend_order(host: Host, expected: list[tuple[str, list[str]]]) -> None:
    assert _installs(host) == expected


def test_plan_shape_and_urls() -> None:
    first = plan(Want(version="b11284"), RECIPE, Host(os="linux", arch="x64", nvidia_driver="580.95.05"))[0].to_json()
    assert first["id"] == "llamacpp" and first["version"] == "b11284" and first["tested"] is True
    assert first["layout"] == "v1" and first["backend"] == "cuda-13.4" and first["chosen_by"] == "tested"
    assert first["why"] == ("Linux x64, NVIDIA driver 580.95.05: NVIDIA driver 580 runs CUDA 13; "
                            "no CUDA 13 runtime on the system, so its archive too")
    assert first["assets"][0]["url"] == ("https://github.com/ggml-org/llama.cpp/releases/download/b11284/"
                                         "llama-b11284-bin-ubuntu-cuda-13.4-x64.tar.gz")
    assert set(first["assets"][0]) == {"name", "url", "sha256", "size", "digest_source", "checked"}
    assert first["assets"][0]["sha256"] is not None and first["assets"][0]["digest_source"] == "pin"


@pytest.mark.parametrize(("backend", "host", "install"), [
    pytest.param("cuda", Host(os="linux", arch="x64", nvidia_driver="535.1"), "b11642-cuda-12.8",
                 id="family-within-driver"),
    pytest.param("cuda", Host(os="linux", arch="x64", nvidia_driver="580.1"), "b11642-cuda-13.4", id="family-newest"),
    pytest.param("cuda", Host(os="linux", arch="x64"), "b11642-cuda-13.4", id="family-no-driver-newest"),
    pytest.param("cuda-12.8", Host(os="linux", arch="x64", nvidia_driver="580.1"), "b11642-cuda-12.8", id="exact"),
    pytest.param("sycl-fp16", Host(os="linux", arch="x64"), "b11642-sycl-fp16", id="sycl-only-when-named"),
    pytest.param("vulkan", Host(os="linux", arch="x64"), "b11642-vulkan", id="vulkan-named-without-driver"),
])
def test_named_backend_gives_one_plan_per_build(backend: str, host: Host, install: str) -> None:
    plans = plan_build(Want(backend=backend), RECIPE, host)
    assert [p.install for p in plans] == [install]
    assert f"{backend}, as named" in plans[0].why
    # without --version, the older tested build's plan follows as a fallback
    assert [p.install for p in plan(Want(backend=backend), RECIPE, host)] == [
        install, install.replace("b11642", "b11284")]


@pytest.mark.parametrize(("want", "installs"), [
    pytest.param(Want(), ["b11642-cuda-13.4", "b11642-cpu", "b11284-cuda-13.4", "b11284-cpu"], id="fallback"),
    pytest.param(Want(version="b11284"), ["b11284-cuda-13.4", "b11284-cpu"], id="version-named-no-fallback"),
])
def test_older_tested_builds_follow_as_fallbacks(want: Request, installs: list[str]) -> None:
    host = Host(os="linux", arch="x64", nvidia_driver="580.95.05")
    assert [p.install for p in plan(want, RECIPE, host)] == installs


def test_named_backend_missing_is_refused_with_what_there_is() -> None:
    with pytest.raises(PlanRefused, match=r"llama.cpp b11642 has no rocm build for macos-arm64 \(it has: metal\)"):
        plan(Want(backend="rocm"), RECIPE, Host(os="macos", arch="arm64"))


def test_untested_build_needs_untested() -> None:
    tested = r"b11700 is not a build this adapter was tested with \(tested: b11642, b11284\)"
    with pytest.raises(PlanRefused, match=tested):
        plan(Want(version="b11700"), RECIPE, Host(os="linux", arch="x64"))


def test_untested_build_plans_from_the_listing_with_its_digests() -> None:
    digest = "ab" * 32
    listing = MemoryListing([Release("b11700", assets=(
        Asset("llama-b11700-bin-ubuntu-x64.tar.gz", "https://example.invalid/cpu.tgz", 123, f"sha256:{digest}"),
        Asset("llama-b11700-bin-win-cpu-x64.zip", "https://example.invalid/win.zip", 9),
    ))])
    plans = plan(Want(version="b11700", untested=True), RECIPE, Host(os="linux", arch="x64"), listing)
    assert len(plans) == 1
    p = plans[0].to_json()
    assert (p["install"], p["tested"], p["chosen_by"], "layout" in p) == ("b11700-cpu", False, "untested", False)
    assert p["assets"] == [{"name": "llama-b11700-bin-ubuntu-x64.tar.gz", "url": "https://example.invalid/cpu.tgz",
                            "sha256": digest, "size": 123, "digest_source": "api", "checked": ["api"]}]
    with pytest.raises(LookupError, match="release b11701 not found"):  # the source's own error
        plan(Want(version="b11701", untested=True), RECIPE, Host(os="linux", arch="x64"), listing)
    # without a listing an untested build cannot be planned: its archives are known only from there
    with pytest.raises(PlanRefused, match="known only from the release listing"):
        plan(Want(version="b11700", untested=True), RECIPE, Host(os="linux", arch="x64"))


def test_listed_urls_and_digests_for_a_tested_build_and_a_fallback_missing_from_the_listing() -> None:
    listing = MemoryListing([Release("b11642", assets=(
        Asset("llama-b11642-bin-ubuntu-x64.tar.gz", "https://mirror.test/x.tgz", 5, "sha256:" + "cd" * 32),))])
    plans = plan(Want(), RECIPE, Host(os="linux", arch="x64"), listing)  # b11284 is not in the listing: no fallback
    assert [(p.install, p.assets[0].url, p.assets[0].sha256, p.assets[0].digest_source) for p in plans] == [
        ("b11642-cpu", "https://mirror.test/x.tgz", "cd" * 32, "api")]


def test_from_archive_is_one_plan_as_named() -> None:
    p = plan(Want(from_="/tmp/llama-b11642-bin-ubuntu-vulkan-x64.tar.gz", sha256="cd" * 32), RECIPE,
             Host(os="linux", arch="x64"))[0].to_json()
    assert (p["install"], p["tested"], p["layout"], p["chosen_by"]) == ("b11642-vulkan", True, "v2", "from")
    assert p["assets"][0]["sha256"] == "cd" * 32 and p["why"].endswith(", as named")
    pinned = plan(Want(from_="/tmp/llama-b11284-bin-ubuntu-vulkan-x64.tar.gz"), RECIPE, Host(os="linux", arch="x64"))[0]
    assert (pinned.assets[0].digest_source, pinned.facts) == ("pin", {"layout": "v1"})  # the recipe's digest
    with pytest.raises(DigestConflict, match="a pin is never overridden"):
        plan(Want(from_="/tmp/llama-b11284-bin-ubuntu-vulkan-x64.tar.gz", sha256="cd" * 32), RECIPE,
             Host(os="linux", arch="x64"))
    with pytest.raises(PlanRefused, match="is built for linux-x64; this is macOS arm64"):
        plan(Want(from_="/tmp/llama-b11284-bin-ubuntu-vulkan-x64.tar.gz", sha256="cd" * 32), RECIPE,
             Host(os="macos", arch="arm64"))
    with pytest.raises(PlanRefused, match="custom is not a build"):
        plan(Want(from_="/tmp/my-build.tar.gz"), RECIPE, Host(os="linux", arch="x64"))
    custom = plan(Want(from_="/tmp/my-build.tar.gz", untested=True), RECIPE, Host(os="linux", arch="x64"))[0]
    assert (custom.install, custom.tested) == ("custom-cpu", False)


def test_no_build_for_the_platform() -> None:
    recipe = {**RECIPE, "tested": [{"version": "b11642", "layout": "v2",
                                    "assets": [{"name": "llama-b11642-bin-macos-arm64.tar.gz"}]}]}
    with pytest.raises(PlanRefused, match="publishes no build for linux-x64"):
        plan(Want(), recipe, Host(os="linux", arch="x64"))
