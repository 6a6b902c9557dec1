"""Pure parts of the llama.cpp adapter: budget, state identity, recipe, options, log tail (the
locator's rules are tests/runtime/test_locate.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superfluid.runtime.errors import UsageError
from superfluid.runtime.llamacpp import layout as L
from superfluid.runtime.llamacpp import options as O
from superfluid.runtime.llamacpp import recipe as R
from superfluid.runtime.llamacpp.drive import Device
from superfluid.runtime.llamacpp.loader import LogTail
from superfluid.runtime.llamacpp.sizing import (
    HEADROOM,
    HOST_LIMIT,
    export_budget,
    resolve_device,
    state_identity,
)
from superfluid.runtime.options import check_options

GiB = 1 << 30


def dev(kind: str, free: int, total: int = 16 * GiB, name: str = "GPU0") -> Device:
    return Device(0, name, "a device", "CUDA" if kind != "cpu" else "CPU", kind, free, total)


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


# --- recipe --------------------------------------------------------------------------------------

class TestRecipe:
    @pytest.mark.parametrize("name,platform,backend,cudart", [
        ("llama-b11284-bin-ubuntu-cuda-13.4-arm64.tar.gz", "linux-arm64", "cuda-13.4", False),
        ("cudart-llama-b11284-bin-ubuntu-cuda-12.8-x64.tar.gz", "linux-x64", "cuda-12.8", True),
        ("llama-b11284-bin-macos-arm64.tar.gz", "macos-arm64", "metal", False),
        ("llama-b11284-bin-macos-x64.tar.gz", "macos-x64", "cpu", False),
        ("llama-b11284-bin-ubuntu-x64.tar.gz", "linux-x64", "cpu", False),
        ("llama-b11284-bin-ubuntu-openvino-2026.4-x64.tar.gz", "linux-x64", "openvino-2026.4", False),
    ])
    def test_archive_names_say_platform_and_backend(self, name: str, platform: str, backend: str,
                                                    cudart: bool) -> None:
        a = R.parse_name(name)
        assert a is not None and (a.build, a.platform, a.backend, a.cudart) == ("b11284", platform, backend, cudart)

    @pytest.mark.parametrize("name", ["llama-b11284-bin-win-cpu-x64.zip", "llama-b11284-xcframework.zip",
                                      "llama-v1-bin-ubuntu-x64.tar.gz", "llama-b1-bin-ubuntu-s390x.tar.gz"])
    def test_other_names_are_not_archives_we_know(self, name: str) -> None:
        assert R.parse_name(name) is None

    def test_the_tested_builds_and_their_layouts(self) -> None:
        builds = R.tested()
        assert [(b.version, b.layout) for b in builds] == [("b11642", "v2"), ("b11284", "v1")]
        by_name = {x.name: x for x in L.LAYOUTS}
        for b in builds:
            assert b.version in by_name[b.layout].builds
            platforms = {a.platform for a in b.archives if not a.cudart}
            assert {"macos-arm64", "linux-x64", "linux-arm64"} <= platforms
            assert all(a.build == b.version for a in b.archives)
        b11642, b11284 = builds
        assert all(a.sha256 is None for a in b11642.archives)  # none known: absent, never invented
        pinned = {a.name: (a.size, a.sha256) for a in b11284.archives}
        assert len(pinned) == 16 and all(sha for _, sha in pinned.values())
        assert pinned["llama-b11284-bin-ubuntu-x64.tar.gz"] == (
            17438632, "f53f2534e7ac8df1ef056117d215f1581feb6c426310d6423efac9adcdd5c2c8")

    def test_a_recipe_missing_its_tested_list_is_refused_by_the_schema(self) -> None:
        from superfluid.runtime.errors import BadFile
        from superfluid.runtime.schema import validate

        data = json.loads((Path(R.__file__).parent / "recipe.json").read_text())
        validate(data, R.SCHEMA, "recipe.json")
        del data["tested"]
        with pytest.raises(BadFile, match="tested"):
            validate(data, R.SCHEMA, "recipe.json")


# --- options -------------------------------------------------------------------------------------

class TestOptions:
    def test_every_spec_option_is_declared(self) -> None:
        spec = ("n-gpu-layers main-gpu split-mode tensor-split load-mode lazy-mode repack threads threads-batch "
                "batch-size ubatch-size flash-attn cache-type-k cache-type-v kv-offload op-offload swa-full "
                "rope-scaling rope-freq-base rope-freq-scale yarn-ext-factor yarn-attn-factor yarn-beta-fast "
                "yarn-beta-slow yarn-orig-ctx lib").split()
        assert [o.name for o in O.OPTIONS] == spec
        assert set(O.FIELDS) | {"tensor-split", "lib"} == set(spec)

    @pytest.mark.parametrize("layout", L.LAYOUTS, ids=lambda x: x.name)
    def test_checked_values_land_in_the_named_fields_of_either_layout(self, layout: L.Layout) -> None:
        values = check_options(O.OPTIONS, [("n-gpu-layers", "0"), ("split-mode", "none"), ("repack", "false"),
                                           ("threads", "3"), ("cache-type-k", "q8_0"), ("flash-attn", "on"),
                                           ("kv-offload", "no"), ("rope-freq-base", "20000"),
                                           ("tensor-split", "3,1")])
        model, context = layout.model(), layout.context()
        keep = O.apply(values, model, context)
        assert (model.n_gpu_layers, model.split_mode, model.use_extra_bufts) == (0, 0, False)
        assert list(model.tensor_split[:3]) == [3.0, 1.0, 0.0] and keep
        assert (context.n_threads, context.type_k, context.flash_attn_type) == (3, 8, 1)
        assert (context.offload_kqv, context.rope_freq_base) == (False, 20000.0)

    def test_bad_values_are_usage_errors(self) -> None:
        with pytest.raises(UsageError, match="--cache-type-v 'q3'"):
            check_options(O.OPTIONS, [("cache-type-v", "q3")])
        with pytest.raises(UsageError, match="--threads '0'"):
            check_options(O.OPTIONS, [("threads", "0")])


def test_the_log_tail_keeps_the_last_error_lines_only() -> None:
    tail = LogTail()
    tail(2, b"info line\n", None)
    tail(4, b"llama_model_load: error loading model: ", None)
    tail(5, b"bad magic\n", None)
    for i in range(10):
        tail(4, f"error {i}\n".encode(), None)
    assert len(tail.errors) == 8 and tail.errors[-1] == "error 9"
    tail.errors.clear()
    tail(4, b"llama_model_load: error loading model: ", None)
    tail(5, b"bad magic\n", None)
    assert tail.last() == "llama_model_load: error loading model: bad magic"
