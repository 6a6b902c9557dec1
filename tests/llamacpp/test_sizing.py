"""``runtime/llamacpp/sizing``: the budget a device grants, the device a load resolves to, and the
state identity of a model's settings."""

from __future__ import annotations

import pytest

from superfluid.runtime.llamacpp.drive import Device
from superfluid.runtime.llamacpp.sizing import (
    HEADROOM,
    HOST_LIMIT,
    export_budget,
    resolve_device,
    state_identity,
)

GiB = 1 << 30


def dev(kind: str, free: int, total: int = 16 * GiB, name: str = "GPU0") -> Device:
    return Device(index=0, name=name, description="a device", backend="CUDA" if kind != "cpu" else "CPU", kind=kind,
                  memory_free=free, memory_total=total)


# --- export_budget: one function keyed on the resolved device ---------------------------------------

class TestExportBudget:
    def test_no_accelerator_grants_host_memory_within_8_gib(self) -> None:
        assert export_budget(None, host_memory=64 * GiB).bytes == HOST_LIMIT == 8 * GiB
        assert export_budget(None, host_memory=4 * GiB).bytes == 4 * GiB

    def test_the_cpu_device_is_the_host_path_even_though_it_has_free_memory_zero(self) -> None:
        # the seed's bug: a CPU-only host read the offload device's free memory (0) and kept nothing
        assert export_budget(dev("cpu", 0, 0), host_memory=32 * GiB).bytes == 8 * GiB

    def test_a_device_with_no_free_memory_grants_nothing_and_names_the_headroom(self) -> None:
        budget = export_budget(dev("gpu", 0), host_memory=64 * GiB)
        assert budget.bytes == 0
        assert "GPU0 reports no free memory" in budget.why and str(HEADROOM) in budget.why

    def test_a_device_grants_its_free_memory_less_the_headroom(self) -> None:
        assert export_budget(dev("gpu", 10 * GiB), host_memory=1).bytes == 10 * GiB - HEADROOM
        small = export_budget(dev("gpu", HEADROOM // 2), host_memory=1)
        assert small.bytes == 0 and "headroom" in small.why

    def test_unknown_host_memory_grants_nothing(self) -> None:
        assert export_budget(None, host_memory=None).bytes == 0


class TestResolveDevice:
    devices = [dev("cpu", 0, 0, "CPU"), dev("gpu", 5, name="GPU0"), dev("gpu", 6, name="GPU1")]

    def test_cpu_only_hosts_resolve_to_none(self) -> None:
        assert resolve_device([dev("cpu", 0, 0, "CPU")], {}) is None

    def test_no_offloaded_layers_resolve_to_none(self) -> None:
        assert resolve_device(self.devices, {"n-gpu-layers": 0}) is None

    def test_the_first_accelerator_or_main_gpu_with_split_none(self) -> None:
        assert resolve_device(self.devices, {}).name == "GPU0"  # type: ignore[union-attr]
        picked = resolve_device(self.devices, {"split-mode": "none", "main-gpu": 1})
        assert picked is not None and picked.name == "GPU1"


# --- state identity ------------------------------------------------------------------------------

class TestStateIdentity:
    W = "ab" * 32

    def test_nothing_set_is_the_weights_alone(self) -> None:
        assert state_identity(self.W, {}) == {"key": self.W, "weights": self.W, "settings": {}}
        assert state_identity(self.W, {"threads": 3, "n-gpu-layers": 0})["key"] == self.W

    @pytest.mark.parametrize("name,value", [("cache-type-k", "q8_0"), ("cache-type-v", "q4_0"),
                                            ("rope-scaling", "yarn"), ("rope-freq-base", 1e6),
                                            ("rope-freq-scale", 0.5), ("yarn-ext-factor", 1.0),
                                            ("yarn-attn-factor", 1.0), ("yarn-beta-fast", 32.0),
                                            ("yarn-beta-slow", 1.0), ("yarn-orig-ctx", 4096)])
    def test_each_rope_yarn_and_cache_setting_changes_the_key(self, name: str, value: object) -> None:
        ident = state_identity(self.W, {name: value})
        assert ident["key"] != self.W and ident["settings"] == {name: value}

    def test_keys_differ_by_value_and_ignore_order(self) -> None:
        a = state_identity(self.W, {"cache-type-k": "q8_0", "rope-freq-base": 1e6})
        b = state_identity(self.W, {"rope-freq-base": 1e6, "cache-type-k": "q8_0"})
        c = state_identity(self.W, {"cache-type-k": "q4_0", "rope-freq-base": 1e6})
        assert a["key"] == b["key"] != c["key"]

    def test_f16_named_is_the_default(self) -> None:
        assert state_identity(self.W, {"cache-type-k": "f16", "cache-type-v": "f16"})["key"] == self.W
