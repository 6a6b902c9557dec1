"""Scenarios run against a real libllama in a child process, each printing one JSON line.

Why a child: a native crash must fail a test, not kill pytest; and two builds of libllama must
never share a process (their ``libggml.so.0`` share a soname, so the second would be linked against
the first's ggml).

Usage: ``python -m tests.llamacpp.scenarios <scenario> <libllama> [key=value]...``
"""

from __future__ import annotations

import ctypes as C
import json
import sys
from typing import Any

from superfluid.runtime.llamacpp import drive, loader, sizing
from superfluid.runtime.llamacpp.layout import AbortCallback


def detect(lib: loader.Library, **_: str) -> dict[str, Any]:
    return {"layout": lib.layout.name, "version": lib.version, "context_sizeof": C.sizeof(lib.layout.context),
            "context_defaults": lib.context_defaults.hex(), "devices": [d.to_json() for d in drive.devices(lib)]}


def generate(lib: loader.Library, model: str, prompt: str = "hello world", n: str = "6", **opts: str) -> dict[str, Any]:
    with drive.load_model(lib, model) as m, drive.Context.create(m, n_ctx=128, options=_options(opts)) as ctx:
        tokens = m.tokenize(prompt)
        out = ctx.generate(tokens, int(n))
        return {"prompt": tokens, "generated": out, "text": m.detokenize(out), "n_ctx": ctx.n_ctx}


def _options(opts: dict[str, str]) -> dict[str, Any]:
    return {k.replace("_", "-"): v for k, v in opts.items()}


def size(lib: loader.Library, model: str, k: str = "f16", v: str = "f16", **_: str) -> dict[str, Any]:
    with drive.load_model(lib, model) as m:
        widths = sizing.layer_widths(m)
        try:
            kv: Any = sizing.kv_bytes_per_token(lib, widths, k, v)
        except sizing.SizingRefused as e:
            kv = str(e)
        return {"kv_bytes_per_token": kv, "widths": [list(w) for w in widths], "facts": m.facts()}


def fields(lib: loader.Library, model: str, **_: str) -> dict[str, Any]:
    """Set embeddings and an abort callback through our struct; report what the library did."""
    out: dict[str, Any] = {}
    with drive.load_model(lib, model) as m:
        tokens = m.tokenize("hello")
        with drive.Context.create(m, n_ctx=128, fields={"embeddings": True, "pooling_type": 0}) as ctx:
            out["embeddings_decode"] = ctx.decode(tokens)
            emb = ctx.embedding()
            out["embedding"] = None if emb is None else len(emb)
        with drive.Context.create(m, n_ctx=128) as ctx:
            out["plain_decode"] = ctx.decode(tokens)
            out["plain_embedding"] = ctx.embedding() is not None
        calls: list[int] = []

        def abort(_data: Any) -> bool:
            calls.append(1)
            return True

        callback = AbortCallback(abort)
        with drive.Context.create(m, n_ctx=128, fields={"abort_callback": callback}) as ctx:
            out["abort_decode"] = ctx.decode(tokens)
            out["abort_calls"] = len(calls)
        never: list[int] = []
        quiet = AbortCallback(lambda _d: bool(never.append(1)))
        with drive.Context.create(m, n_ctx=128, fields={"abort_callback": quiet}) as ctx:
            out["false_abort_decode"] = ctx.decode(tokens)
            out["false_abort_calls"] = len(never)
    return out


def badmodel(lib: loader.Library, model: str, **_: str) -> dict[str, Any]:
    try:
        drive.load_model(lib, model)
    except Exception as e:  # noqa: BLE001 - the scenario reports whatever the failure was
        return {"error": type(e).__name__, "message": str(e)}
    return {"error": None}


SCENARIOS = {"detect": detect, "generate": generate, "size": size, "fields": fields, "badmodel": badmodel}


def main(argv: list[str]) -> int:
    name, path, *rest = argv
    kwargs = dict(item.split("=", 1) for item in rest)
    lib = loader.load(path)
    print(json.dumps(SCENARIOS[name](lib, **kwargs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
