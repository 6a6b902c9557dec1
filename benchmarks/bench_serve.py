"""Serving speed: tokens per second of ``/v1/completions`` against the decode loop called directly.

The deterministic tiny GGUF (``always-the.gguf``: greedy text never ends, so every run decodes
exactly ``--tokens`` tokens) is served by ``superfluid serve`` with a real libllama (``--layout``,
built into the native cache when missing) on a loopback port. Measured in one run, interleaved so
that machine noise hits all alike, the median of each:

- **direct**: in this process, through ``ctypes``, the same work a completion does: tokenize the
  prompt, a fresh context, decode the prompt, then the greedy loop (``Context.generate``);
- **served**: one ``POST /v1/completions`` (``temperature: 0``), from request to the whole answer;
- **streamed**: the same with ``stream: true``, from request to ``data: [DONE]``.

Prints tokens per second of each, the serving overhead as a ratio (direct / served; the target is
at most 1.5x) and streamed against non-streamed.

Usage: ``python benchmarks/bench_serve.py [--runs N] [--tokens N] [--layout v1|v2] [--json]``; exit 1
when the serving overhead is over target.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))
TARGET = 1.5
PROMPT = "Once upon a time"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_sf_native_{name}", ROOT / "tests" / "native" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _direct(lib: Any, model: Any, tokens: int) -> float:
    from superfluid.runtime.llamacpp.drive import Context

    start = time.perf_counter()
    prompt = model.tokenize(PROMPT)
    with Context.create(model, n_ctx=256) as ctx:
        out = ctx.generate(prompt, tokens)
    elapsed = time.perf_counter() - start
    if len(out) != tokens:
        raise SystemExit(f"bench: the direct loop made {len(out)} tokens, not {tokens}")
    return elapsed


def _served(port: int, tokens: int, stream: bool) -> float:
    body = json.dumps({"prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "stream": stream}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        start = time.perf_counter()
        conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        elapsed = time.perf_counter() - start
    finally:
        conn.close()
    if resp.status != 200:
        raise SystemExit(f"bench: the server answered {resp.status}: {raw[:300]!r}")
    if stream:
        made = raw.count(b'"text":" the"')
        if not raw.rstrip().endswith(b"data: [DONE]"):
            raise SystemExit("bench: the stream did not end with [DONE]")
    else:
        made = json.loads(raw)["usage"]["completion_tokens"]
    if made != tokens:
        raise SystemExit(f"bench: the server made {made} tokens, not {tokens}")
    return elapsed


def _start(lib_dir: Path, model: Path, home: str) -> tuple[subprocess.Popen[str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUPERFLUID_", "BASERT_"))}
    env["SUPERFLUID_HOME"] = home
    proc = subprocess.Popen([str(BIN / "superfluid"), "serve", "--model", str(model), "--llamacpp-lib", str(lib_dir),
                             "--port", "0"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " serves " not in line:
        proc.kill()
        raise SystemExit(f"bench: superfluid serve did not start: {line}{proc.communicate()[1][-500:]}")
    port = int(line.split(" on http://", 1)[1].split(" ", 1)[0].rsplit(":", 1)[1])
    return proc, port


def measure(runs: int, tokens: int, layout: str) -> dict[str, Any]:
    """Seconds per run of each way, their tokens per second and the ratios."""
    from superfluid.runtime.llamacpp.drive import load_model
    from superfluid.runtime.llamacpp.loader import load

    lib_dir = Path(_script("build_libllama").build(layout))
    model_path = _script("make_gguf").write_standard()["always-the.gguf"]
    lib = load(str(lib_dir / "libllama.so"))
    samples: dict[str, list[float]] = {"direct": [], "served": [], "streamed": []}
    with tempfile.TemporaryDirectory(prefix="sf-bench-serve-") as home, load_model(lib, str(model_path)) as model:
        proc, port = _start(lib_dir, model_path, home)
        try:
            for _ in range(2):  # warm: the page cache, the server's first context
                _direct(lib, model, tokens)
                _served(port, tokens, False)
                _served(port, tokens, True)
            for _ in range(runs):
                samples["direct"].append(_direct(lib, model, tokens))
                samples["served"].append(_served(port, tokens, False))
                samples["streamed"].append(_served(port, tokens, True))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    median = {k: statistics.median(v) for k, v in samples.items()}
    tps = {k: tokens / v for k, v in median.items()}
    return {"layout": layout, "tokens": tokens, "runs": runs, "median_s": median, "tokens_per_s": tps,
            "overhead": median["served"] / median["direct"],
            "streamed_overhead": median["streamed"] / median["direct"],
            "streamed_vs_served": median["streamed"] / median["served"], "target": TARGET}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tokens", type=int, default=200, help="tokens per completion (the context holds 256)")
    parser.add_argument("--layout", choices=("v1", "v2"), default="v2")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.tokens <= 240:
        parser.error("--tokens: 1 to 240 (the tiny model's context is 256 tokens)")
    r = measure(args.runs, args.tokens, args.layout)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        t = r["tokens_per_s"]
        verdict = "ok" if r["overhead"] <= TARGET else f"OVER the {TARGET:g}x target"
        print(f"libllama {r['layout']}, {r['tokens']} tokens per completion, median of {r['runs']}:")
        print(f"  direct ctypes decode loop: {t['direct']:.0f} tokens/s")
        print(f"  /v1/completions:           {t['served']:.0f} tokens/s: {r['overhead']:.2f}x the direct loop's "
              f"time ({verdict})")
        print(f"  /v1/completions, stream:   {t['streamed']:.0f} tokens/s: {r['streamed_overhead']:.2f}x the direct "
              f"loop's time; streamed vs not: {r['streamed_vs_served']:.2f}x")
    return 0 if r["overhead"] <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
