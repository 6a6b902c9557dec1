"""What llama.cpp's check reports beside its options: format, tokenizer, capabilities (no bindings loaded).

See docs/adapters.md, "The worker contract".
"""

from __future__ import annotations

from superfluid.runtime.contract import capabilities

__all__ = ["FORMATS", "TOKENIZER", "CAPABILITIES"]

FORMATS = [{"id": "gguf", "describe": "a GGUF file", "file": {"extensions": ["gguf"], "magic": "GGUF"}}]
#: libllama tokenizes (``llama_tokenize``, the model's own vocabulary): no tokenizer of ours
TOKENIZER = {"from": "engine"}
#: the static record (``runtime.contract``): llama.cpp's KV cache is typed, not sized in bits
CAPABILITIES = capabilities(kv_bits="no such knob: llama.cpp's KV cache types are --llamacpp-cache-type-k and "
                                    "--llamacpp-cache-type-v")
