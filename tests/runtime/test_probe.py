"""``runtime/probe.judge_probe``: the verdict on a staged install from its worker's check report.

One table: each row a plan (by what differs from a tested baseRT 0.4.0 cpu plan of ABI 1), the
report, the judge's options, and either the ``Probed`` it answers or the refusal's message
fragment and fix."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from superfluid.runtime.planning import Plan, PlanAsset
from superfluid.runtime.probe import Probed, ProbeRefused, cpu_fallback, judge_probe, missing_cuda_runtime

TESTED = Plan(id="basert", version="0.4.0", backend="cpu", assets=(), tested=True, chosen_by="abi", abi=1,
              why="the newest release of ABI 1")
UNTESTED = replace(TESTED, version="0.5.0", tested=False, chosen_by="untested", abi=2)
FROM = replace(TESTED, version="0.5.0", tested=False, chosen_by="from", abi=None,
              assets=(PlanAsset(name="basert-engine-linux-x64-0.5.0.tar.gz", sha256=None, size=None,
                                url="/srv/basert-engine-linux-x64-0.5.0.tar.gz", digest_source="computed"),))
FOR = replace(TESTED, version="0.5.0", tested=True, chosen_by="abi", abi=2, made_for={"version": "0.9.0"})
LLAMA = Plan(id="llamacpp", version="b11642", backend="cpu", assets=(), tested=True, chosen_by="build", abi=None,
             why="the newest tested build", facts={"layout": "v2"})
CUDA = replace(LLAMA, backend="cuda-13.4")

OK = {"available": True, "abi": 1, "runtime": {"version": "0.4.0 (reference)"}}
BY_ABI_2 = {"available": "libbaseRT states ABI 2; this superfluid drives ABI 1", "stated": {"abi": 2}}
BY_ABI_3 = {"available": "libbaseRT states ABI 3", "stated": {"abi": 3}}
UNNUMBERED = {"available": "libbaseRT states no ABI number", "stated": {"abi": None}}
MISSING_SYMBOL = {"available": "libbaseRT lacks basert_model_load"}
NOT_ANOTHER_RELEASE = "nothing was installed: the bundle is not the release it says"
CPU_DEVICE = ({"backend": "CPU", "name": "cpu"},)


def probed(tested: bool, abi: int | None, version: str | None, devices: tuple[dict[str, Any], ...] = (),
           extra: dict[str, Any] | None = None) -> Probed:
    return Probed(tested, abi, version, devices, extra or {})


def refused(fragment: str, fix: str | None = None) -> tuple[str, str | None]:
    return fragment, fix


CASES = [
    # -- the check says available ------------------------------------------------------------------
    pytest.param(TESTED, OK, {}, probed(True, 1, "0.4.0"), id="tested-available"),
    pytest.param(TESTED, {**OK, "runtime": {"version": "0.3.1"}}, {"holds_version": True},
                 refused("the bundle of basert 0.4.0 holds a library of version 0.3.1: the release is not what it says",
                         "nothing was installed; report it to its publisher"), id="version-held-and-wrong"),
    pytest.param(TESTED, {**OK, "runtime": {"version": "0.3.1"}}, {}, probed(True, 1, "0.3.1"),
                 id="version-not-held"),
    pytest.param(replace(TESTED, version="custom"), {**OK, "runtime": {"version": "0.3.1"}}, {"holds_version": True},
                 probed(True, 1, "0.3.1"), id="version-held-but-custom"),
    pytest.param(TESTED, {"available": True, "abi": 1}, {"holds_version": True}, probed(True, 1, None),
                 id="version-held-but-unreported"),
    pytest.param(TESTED, {**OK, "runtime": {"version": "   "}}, {}, probed(True, 1, None), id="version-blank"),
    pytest.param(TESTED, {**OK, "runtime": "0.4.0"}, {}, probed(True, 1, None), id="runtime-not-an-object"),
    pytest.param(TESTED, {**OK, "abi": 2}, {},
                 refused("its library states ABI 2, and the release states 1",
                         "nothing was installed: the bundle is not the release it says"), id="abi-differs"),
    pytest.param(TESTED, {**OK, "abi": "2"}, {}, probed(True, None, "0.4.0"), id="abi-not-a-number-is-none"),
    pytest.param(replace(TESTED, abi=None), {**OK, "abi": 2}, {}, probed(True, 2, "0.4.0"), id="plan-abi-unknown"),
    pytest.param(LLAMA, {"available": True, "layout": "v2"}, {}, probed(True, None, None), id="layout-agrees"),
    pytest.param(LLAMA, {"available": True, "layout": "v1"}, {},
                 refused("its library is laid out as v1, but llamacpp b11642 was tested as v2",
                         "nothing was installed: the archives are not the build the plan names"), id="layout-differs"),
    pytest.param(LLAMA, {"available": True}, {}, probed(True, None, None), id="layout-unreported"),
    pytest.param(replace(LLAMA, facts={"flavour": "b"}), {"available": True, "flavour": "a"}, {},
                 refused("its check reports flavour 'a', and the plan says 'b'",
                         "nothing was installed: the archives are not the build the plan names"),
                 id="other-fact-differs"),
    pytest.param(CUDA, {"available": True, "devices": [{"backend": "CUDA"}]}, {},
                 probed(True, None, None, ({"backend": "CUDA"},)), id="gpu-build-sees-its-device"),
    pytest.param(CUDA, {"available": True, "devices": list(CPU_DEVICE)}, {},
                 refused("its check finds no cuda-13.4 device here (it sees: CPU)"), id="gpu-build-sees-another"),
    pytest.param(CUDA, {"available": True}, {}, refused("its check finds no cuda-13.4 device here (it sees: none)"),
                 id="gpu-build-sees-none"),
    pytest.param(CUDA, {"available": True, "devices": [{"name": "x"}]}, {},
                 refused("its check finds no cuda-13.4 device here (it sees: ?)"), id="device-without-backend"),
    pytest.param(CUDA, {"available": True}, {"needs_device": False}, probed(True, None, None),
                 id="device-not-needed"),
    pytest.param(replace(LLAMA, backend="vulkan"), {"available": True, "devices": ["vulkan", {"backend": "Vulkan"}]},
                 {}, probed(True, None, None, ({"backend": "Vulkan"},)), id="devices-not-objects-dropped"),
    pytest.param(LLAMA, {"available": True, "devices": list(CPU_DEVICE)}, {}, probed(True, None, None, CPU_DEVICE),
                 id="cpu-build-any-device"),
    pytest.param(LLAMA, {"available": True, "layout": "v2"}, {"keeps": ("layout", "model")},
                 probed(True, None, None, (), {"layout": "v2", "model": None}), id="keys-kept"),
    # -- the check refuses ---------------------------------------------------------------------------
    pytest.param(TESTED, BY_ABI_2, {},
                 refused("basert 0.4.0-cpu: the staged library was refused by its check: libbaseRT states ABI 2",
                         NOT_ANOTHER_RELEASE),
                 id="tested-refused-by-abi"),
    pytest.param(TESTED, MISSING_SYMBOL, {"untested": True},
                 refused("the staged library was refused by its check: libbaseRT lacks basert_model_load"),
                 id="tested-refused-for-a-symbol"),
    pytest.param(TESTED, {"abi": 1}, {}, refused("refused by its check: its check said nothing about availability"),
                 id="availability-unsaid"),
    pytest.param(TESTED, {"available": False}, {}, refused("its check said nothing about availability"),
                 id="availability-false-is-unsaid"),
    pytest.param(UNTESTED, BY_ABI_2, {}, probed(False, 2, "0.5.0"), id="untested-refused-by-its-own-abi"),
    pytest.param(UNTESTED, BY_ABI_3, {},
                 refused("its library states ABI 3, and the release states 2: libbaseRT states ABI 3"),
                 id="untested-refused-by-another-abi"),
    pytest.param(replace(UNTESTED, abi=None), UNNUMBERED, {}, probed(False, None, "0.5.0"),
                 id="untested-unnumbered-off-the-line"),
    pytest.param(UNTESTED, UNNUMBERED, {}, refused("its library states ABI None, and the release states 2"),
                 id="untested-numbered-but-unnumbered"),
    pytest.param(UNTESTED, {"available": "x", "stated": {"abi": "2"}}, {},
                 refused("its library states ABI None, and the release states 2"), id="stated-abi-not-a-number"),
    pytest.param(UNTESTED, MISSING_SYMBOL, {"untested": True},
                 refused("the staged library was refused by its check: libbaseRT lacks basert_model_load"),
                 id="untested-never-relaxes-integrity"),
    pytest.param(UNTESTED, {"available": "no", "stated": "2"}, {}, refused("refused by its check: no"),
                 id="stated-not-an-object"),
    pytest.param(replace(UNTESTED, version="custom"), BY_ABI_2, {}, probed(False, 2, None),
                 id="untested-custom-has-no-version"),
    pytest.param(FROM, BY_ABI_2, {"untested": False},
                 refused("refused by its check: libbaseRT states ABI 2",
                         "superfluid runtime install basert --from /srv/basert-engine-linux-x64-0.5.0.tar.gz "
                         "--untested"), id="from-refused-by-abi"),
    pytest.param(FROM, BY_ABI_2, {"untested": True}, probed(False, 2, "0.5.0"), id="from-untested-by-abi"),
    pytest.param(replace(FROM, abi=1), BY_ABI_2, {"untested": True},
                 refused("its library states ABI 2, and the release states 1"), id="from-untested-another-abi"),
    pytest.param(FROM, MISSING_SYMBOL, {"untested": True}, refused("refused by its check: libbaseRT lacks"),
                 id="from-untested-for-a-symbol"),
    pytest.param(FOR, BY_ABI_2, {}, probed(True, 2, "0.5.0"), id="for-release-its-abi-tested"),
    pytest.param(replace(FOR, tested=False), BY_ABI_2, {}, probed(False, 2, "0.5.0"), id="for-release-untested"),
    pytest.param(FOR, {"available": "states ABI 1", "stated": {"abi": 1}}, {},
                 refused("its library states ABI 1, and the release states 2"), id="for-release-another-abi"),
    pytest.param(replace(FOR, abi=None), {"available": "x", "stated": {"abi": 1}}, {}, probed(False, 1, "0.5.0"),
                 id="for-release-abi-unknown"),
    pytest.param(UNTESTED, {**BY_ABI_2, "devices": [{"backend": "CPU"}], "layout": "v9"}, {"keeps": ("layout",)},
                 probed(False, 2, "0.5.0", ({"backend": "CPU"},), {"layout": "v9"}), id="untested-keeps-keys"),
]


@pytest.mark.parametrize(("plan", "report", "options", "want"), CASES)
def test_judge_probe(plan: Plan, report: dict[str, Any], options: dict[str, Any],
                     want: Probed | tuple[str, str | None]) -> None:
    kwargs = {"untested": False, **options}
    if isinstance(want, Probed):
        assert judge_probe(plan, report, **kwargs) == want
        return
    fragment, fix = want
    with pytest.raises(ProbeRefused) as caught:
        judge_probe(plan, report, **kwargs)
    said = caught.value.fixes[0].command if caught.value.fixes else caught.value.advice
    assert fragment in str(caught.value) and said == fix
    assert str(caught.value).startswith(f"{plan.id} {plan.install}: ") and caught.value.plan is plan
    assert caught.value.reason in str(caught.value)


def test_the_loader_s_words_for_a_missing_cuda_runtime_are_read() -> None:
    assert missing_cuda_runtime("its check finds no cuda-12.8 device here (it sees: CPU); libggml-cuda.so does not "
                                "load: libcudart.so.12: cannot open shared object file") == "libcudart.so.12"
    assert missing_cuda_runtime("libggml-cuda.so needs libcudart.so.13, which is on none of this host's library "
                                "paths") == "libcudart.so.13"
    assert missing_cuda_runtime("libcublas.so.12: cannot open shared object file") is None


def test_a_gpu_build_without_its_device_serves_on_the_cpu_and_says_so() -> None:
    cpu = [{"backend": "CPU"}]
    assert cpu_fallback("b1-vulkan", "vulkan", {"devices": cpu}) == (
        "b1-vulkan is a vulkan build, and its check finds no vulkan device here (it sees: CPU): it serves on the CPU")
    assert cpu_fallback("b1-vulkan", "vulkan", {"devices": [*cpu, {"backend": "Vulkan"}]}) is None
    assert cpu_fallback("b1-cpu", "cpu", {"devices": cpu}) is None
    assert cpu_fallback("b1-cuda-12.8", "cuda-12.8", {}) is None  # no devices listed: nothing to judge
