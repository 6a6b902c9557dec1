"""Install speed against a shell pipeline, and the cost of a warm ``--dry-run``, in one run.

1. A ~200 MB baseRT bundle (the reference engine plus incompressible padding) is published on the
   loopback release server. ``superfluid runtime install basert --mirror <server>`` into a fresh
   ``SUPERFLUID_HOME`` (cold cache: listing, ABI asset, ``.sha256``, download with streaming
   sha256, extraction, the probe in a worker, publish) is timed against
   ``curl -s URL | tee FILE | sha256sum`` then ``tar xzf FILE`` on the same URL, interleaved, the
   median of each taken; the ratio's target is at most 1.3x.
2. The HTTP requests of a warm ``runtime install basert --dry-run`` (a second one in the same home)
   are counted from the server's log: the listing should cost a 304 and nothing else.

Usage: ``python benchmarks/bench_install.py [--runs N] [--mb M] [--json]``; exit 1 when the ratio
is over target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.install import releases  # noqa: E402
from tests.release_server import ReleaseServer  # noqa: E402

BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))
TARGET = 1.3


def _env(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SUPERFLUID_", "BASERT_")) and k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    env["SUPERFLUID_HOME"] = home
    env["CI"] = "1"  # no progress bar
    return env


def _timed(argv: list[str], env: dict[str, str] | None = None, *, shell: bool = False) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv if not shell else argv[0], env=env, shell=shell, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed


def _install_once(server: ReleaseServer, work: Path, i: int) -> float:
    home = work / f"home-{i}"
    home.mkdir()
    try:
        return _timed([str(BIN / "superfluid"), "runtime", "install", "basert", "--mirror", server.mirror_url],
                      _env(str(home)))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _pipeline_once(url: str, work: Path, i: int) -> float:
    out = work / f"pipe-{i}"
    out.mkdir()
    archive = out / "bundle.tar.gz"
    script = (f"set -e; curl -s {url} | tee {archive} | sha256sum >/dev/null; "
              f"mkdir {out}/x && tar xzf {archive} -C {out}/x")
    try:
        return _timed(["sh -c " + _quote(script)], shell=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _warm_dry_run(server: ReleaseServer, work: Path) -> list[tuple[str, int | None]]:
    home = work / "home-dry"
    home.mkdir()
    argv = [str(BIN / "superfluid"), "runtime", "install", "basert", "--mirror", server.mirror_url, "--dry-run"]
    _timed(argv, _env(str(home)))  # cold: fills the listing and sidecar caches
    server.clear_log()
    _timed(argv, _env(str(home)))
    return [(r.path, r.status) for r in server.log]


def measure(runs: int, mb: int) -> dict[str, object]:
    releases.build_engines()
    with tempfile.TemporaryDirectory(prefix="sf-bench-install-") as tmp, ReleaseServer() as server:
        work = Path(tmp)
        data = releases.bundle("0.4.0", padding=mb << 20)
        name = releases.bundle_name("0.4.0")
        server.add_release(releases.REPO, "v0.4.0", {name: data, "basert-engine-abi-1.txt": b"1\n"},
                           sha256_files=True)
        url = server.mirror_url + f"{releases.REPO}/releases/download/v0.4.0/{name}"
        install, pipeline = [], []
        for i in range(runs):
            pipeline.append(_pipeline_once(url, work, i))
            install.append(_install_once(server, work, i))
        requests = _warm_dry_run(server, work)
    med_i, med_p = statistics.median(install), statistics.median(pipeline)
    return {"bundle_bytes": len(data), "runs": runs, "install_s": med_i, "pipeline_s": med_p,
            "ratio": med_i / med_p, "target": TARGET, "install_all_s": install, "pipeline_all_s": pipeline,
            "warm_dry_run_requests": len(requests),
            "warm_dry_run_log": [{"path": p, "status": s} for p, s in requests]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mb", type=int, default=200, help="padding in MiB (default 200)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    r = measure(args.runs, args.mb)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"install of a {r['bundle_bytes'] / 1e6:.0f} MB bundle: superfluid {r['install_s']:.2f} s, "
              f"curl|tee|sha256sum + tar xzf {r['pipeline_s']:.2f} s: {r['ratio']:.2f}x (target <= {TARGET}x; "
              f"median of {r['runs']})")
        statuses = ", ".join(f"{e['status']} {e['path']}" for e in r["warm_dry_run_log"])  # type: ignore[index]
        print(f"warm `runtime install basert --dry-run`: {r['warm_dry_run_requests']} HTTP request(s): {statuses}")
    return 0 if float(r["ratio"]) <= TARGET else 1  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
