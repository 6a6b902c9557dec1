"""``runtime/llamacpp/options``: every option the SPEC names declared, and checked values landing in
the named fields of either layout's structs."""

from __future__ import annotations

import pytest

from superfluid.runtime.errors import UsageError
from superfluid.runtime.llamacpp import layout as L
from superfluid.runtime.llamacpp import options as O
from superfluid.runtime.options import check_options

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
