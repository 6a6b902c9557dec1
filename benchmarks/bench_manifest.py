"""Load on the compat manifest service: ``choose`` requests from 50 concurrent clients on loopback.

Three signed releases (written as ``ci/pack`` writes them, without building wheels) are served two
ways: ``superfluid-manifest serve`` (the standard library's threaded server) and gunicorn with 4
workers (``superfluid.manifest.service:app``). Against each, 50 client threads send a fixed number
of ``GET /v1/choose/...`` requests, cycling through the questions (baseRT ABIs, llama.cpp builds,
MLX versions, with and without a platform), each on a new connection, and check every answer's
status and bytes against the first answer to that path. Prints requests per second and p50/p99
latency for each server; exits 1 on any failed request. Bounded: loopback only, every request
times out after 10 s, the servers are stopped at the end.

Usage: ``python benchmarks/bench_manifest.py [--requests N] [--clients C] [--json]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))
sys.path.insert(0, str(ROOT))

PATHS = [
    "/v1/choose/basert/abi/1", "/v1/choose/basert/abi/2", "/v1/choose/basert/abi/3",
    "/v1/choose/basert/version/0.3.0", "/v1/choose/llamacpp/build/b11642", "/v1/choose/llamacpp/build/b11739",
    "/v1/choose/llamacpp/build/b11549?platform=linux-x64", "/v1/choose/mlx/version/0.32.2/macos-arm64",
    "/v1/choose?runtime=basert&abi=2&platform=linux-x64",
]


def _releases(root: Path) -> Path:
    """Three signed release folders under ``root``; answers the public key's file."""
    from superfluid.manifest.minisign import generate
    from tests.manifest.release_folders import base_document, vary, write_release

    key = generate()
    doc = base_document()
    write_release(root, "r0.1.0", vary(doc, "0.1.0"), key)
    write_release(root, "r0.2.0", vary(doc, "0.2.0", abi=2, line=None, builds=[("b11669", "v2"), ("b11642", "v2")]),
                  key)
    write_release(root, "r0.3.0", vary(doc, "0.3.0", abi=2, line=None, builds=[("b11739", "v2")]), key)
    public = root.parent / "release.pub"
    public.write_text(key.public().to_text())
    return public


def _start(argv: list[str], env: Mapping[str, str], pattern: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if pattern in line:
            url = line.split(pattern, 1)[1].split()[0].rstrip("/")
            threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()
            return proc, url
    raise SystemExit(f"bench: {argv[0]} did not start: {''.join(seen)[-2000:]}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _get(host: str, port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def load(url: str, requests: int, clients: int) -> dict[str, Any]:
    """``requests`` GETs of ``PATHS`` in turn from ``clients`` threads; rate, latencies and failures."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    expected = {}
    for path in PATHS:
        status, body = _get(host, int(port), path)
        if status != 200:
            raise SystemExit(f"bench: {url}{path} answered {status}: {body[:300]!r}")
        expected[path] = body
    latencies: list[float] = []
    failures: list[str] = []
    counter = iter(range(requests))
    lock = threading.Lock()

    def client() -> None:
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            path = PATHS[n % len(PATHS)]
            start = time.perf_counter()
            try:
                status, body = _get(host, int(port), path)
                ok = status == 200 and body == expected[path]
                why = f"{path}: HTTP {status}" if not ok else ""
            except OSError as e:
                ok, why = False, f"{path}: {e!r}"
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if not ok:
                    failures.append(why)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    ordered = sorted(latencies)
    return {"requests": float(len(latencies)), "failed": float(len(failures)), "seconds": wall,
            "rps": len(latencies) / wall, "p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
            "first_failure": failures[0] if failures else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="choose requests per server (default 3000)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory(prefix="sf-bench-manifest-") as tmp:
        root = Path(tmp) / "releases"
        root.mkdir()
        public = _releases(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUPERFLUID_")}
        env.update(SUPERFLUID_HOME=str(Path(tmp) / "home"), HOME=tmp)  # gunicorn's control socket under HOME
        servers = {
            "superfluid-manifest serve": ([str(BIN / "superfluid-manifest"), "serve", "--source", str(root), "--key",
                                           str(public), "--port", "0", "--quiet"], "serving on "),
            "gunicorn -w 4": ([str(BIN / "gunicorn"), "--workers", "4", "--bind", "127.0.0.1:0", "--backlog", "512",
                               "superfluid.manifest.service:app"], "Listening at: "),
        }
        for name, (cmd, pattern) in servers.items():
            proc, url = _start(cmd, {**env, "SUPERFLUID_MANIFEST_SOURCE": str(root),
                                     "SUPERFLUID_MANIFEST_KEYS": str(public)}, pattern)
            try:
                results[name] = load(url, args.requests, args.clients)
            finally:
                _stop(proc)
    if args.json:
        print(json.dumps({"clients": args.clients, "results": results}, indent=2))
    else:
        for name, r in results.items():
            print(f"{name}: {int(r['requests'])} choose requests from {args.clients} clients in {r['seconds']:.2f} s: "
                  f"{r['rps']:.0f} req/s, p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                  f"{int(r['failed'])} failed" + (f" (first: {r['first_failure']})" if r["failed"] else ""))
    return 1 if any(r["failed"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
