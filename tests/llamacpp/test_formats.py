"""``runtime/llamacpp/formats``: what llama.cpp's check reports beside its options — a GGUF file, the engine's
own tokenizer, a capability record without a KV-bits knob — read by the adapter without the bindings."""

from __future__ import annotations

import json
import subprocess
import sys

from superfluid.runtime import registry
from superfluid.runtime.conformance import declaration_faults
from superfluid.runtime.llamacpp.formats import CAPABILITIES, FORMATS, TOKENIZER


def test_the_adapter_declares_them() -> None:
    adapter = registry.get("llamacpp")
    facts = adapter.model_facts()
    assert facts.formats == FORMATS and facts.tokenizer == TOKENIZER == {"from": "engine"}
    assert facts.capabilities == CAPABILITIES and CAPABILITIES["load"]["kv_bits"].startswith("no such knob")
    assert declaration_faults(adapter) == []


def test_reading_them_loads_no_bindings() -> None:
    done = subprocess.run([sys.executable, "-c", "import json, sys\n"
                           "from superfluid.runtime import registry\n"
                           "a = registry.get('llamacpp')\n"
                           "a.model_facts()\n"
                           "print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert not loaded & {"superfluid.runtime.llamacpp.bindings", "superfluid.runtime.llamacpp.check"}
