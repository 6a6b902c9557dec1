"""Stand-ins for llama.cpp libraries the adapter must refuse, shared by the layout, refusal and install tests:
the 2026-06-07 context layout (160 bytes like v1, without ``n_outputs_max_per_seq``) and a compiled
shared library exporting every bound function with chosen default-params images."""

from __future__ import annotations

import ctypes as C
import subprocess
from pathlib import Path

from superfluid.runtime.llamacpp import bindings
from superfluid.runtime.llamacpp import layout as L


def older_layout() -> type[C.Structure]:
    """The 2026-06-07 layout (notes §4 history): 160 bytes like v1, without n_outputs_max_per_seq."""
    fields = [(n, t) for n, t, _ in L._CONTEXT_V1 if n != "n_outputs_max_per_seq"]
    return type("ContextParams20260607", (C.Structure,), {"_fields_": fields})


def older_defaults() -> bytes:
    """The context defaults a library of ``older_layout`` returns: n_threads (4) sits at byte 24,
    where v1 has n_outputs_max_per_seq (1)."""
    ctx = older_layout()()
    L.fill(ctx, {n: d for n, _, d in L._CONTEXT_V1
                 if d is not None and n not in ("abort_callback", "n_outputs_max_per_seq")})
    return bytes(ctx)


def stub_library(tmp: Path, context_image: bytes, model_image: bytes, *, omit: tuple[str, ...] = ()) -> Path:
    """A shared library exporting the adapter's functions, with these default-params images."""

    def array(data: bytes) -> str:
        return ", ".join(str(b) for b in data)

    lines = ["#include <stdlib.h>", "#include <string.h>",
             f"struct ctx_img {{ unsigned char b[{len(context_image)}]; }} __attribute__((aligned(8)));",
             f"struct model_img {{ unsigned char b[{len(model_image)}]; }} __attribute__((aligned(8)));",
             f"static const unsigned char CTX[] = {{{array(context_image)}}};",
             f"static const unsigned char MODEL[] = {{{array(model_image)}}};",
             "struct ctx_img llama_context_default_params(void) { struct ctx_img s; memcpy(s.b, CTX, sizeof CTX); "
             "return s; }",
             "struct model_img llama_model_default_params(void) { struct model_img s; memcpy(s.b, MODEL, "
             "sizeof MODEL); return s; }",
             "void llama_log_set(void *cb, void *data) { (void)cb; (void)data; }"]
    special = {"llama_context_default_params", "llama_model_default_params", "llama_log_set"}
    for name in bindings.FUNCTIONS:
        if name in special or name in omit:
            continue
        lines.append(f"void {name}(void) {{ abort(); }}")
    src = tmp / "stub.c"
    src.write_text("\n".join(lines) + "\n")
    lib = tmp / "libllama.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], check=True, capture_output=True)
    return lib
