"""``runtime/llamacpp/options``: every option the SPEC names declared, each with the struct field it lands
in, and bad values refused (where checked values land in either layout's structs: ``test_drive.py``)."""

from __future__ import annotations

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.options import check_options
from superfluid.runtime.llamacpp import options as O

# --- options -------------------------------------------------------------------------------------

class TestOptions:
    def test_every_spec_option_is_declared(self) -> None:
        spec = ("n-gpu-layers main-gpu split-mode tensor-split load-mode lazy-mode repack parallel threads "
                "threads-batch batch-size ubatch-size flash-attn cache-type-k cache-type-v kv-offload op-offload "
                "swa-full rope-scaling rope-freq-base rope-freq-scale yarn-ext-factor yarn-attn-factor yarn-beta-fast "
                "yarn-beta-slow yarn-orig-ctx lib").split()
        assert [o.name for o in O.OPTIONS] == spec
        assert set(O.FIELDS) | {"tensor-split", "lib"} == set(spec)

    def test_bad_values_are_usage_errors(self) -> None:
        with pytest.raises(UsageError, match="--cache-type-v 'q3'"):
            check_options(O.OPTIONS, [("cache-type-v", "q3")])
        with pytest.raises(UsageError, match="--threads '0'"):
            check_options(O.OPTIONS, [("threads", "0")])
