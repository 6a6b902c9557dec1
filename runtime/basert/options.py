"""The options baseRT takes on serve.

See docs/runtimes.md, "basert (baseRT)"; declared by the adapter (``options_from``).
"""

from __future__ import annotations

from superfluid.runtime.kernel.options import Option

__all__ = ["OPTIONS"]

#: basert's serve options (SPEC §7): spelled ``--basert-<name>`` on serve, ``--<name>`` to the worker
OPTIONS: tuple[Option, ...] = (
    Option(name="kv-bits", kind="enum",
           description="bits per KV-cache element (0: the engine's default; 84: K 8-bit, V 4-bit)",
           default="0", values=("0", "4", "8", "16", "84")),
    Option(name="lib", kind="path",
           description="the libbaseRT file (or directory holding it) to load instead of the installed one"),
)
