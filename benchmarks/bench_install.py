"""Install speed against two baselines, the phases of an install, and the cost of a warm ``--dry-run``.

1. A ~210 MB baseRT bundle (the reference engine plus incompressible padding, built with
   ``tests/end_to_end/releases.py``'s ``bundle``) is published on the loopback release server. Three
   contenders run as real subprocesses, interleaved (their order rotated every round, so that
   machine noise and the page cache hit all alike), and the min, median and max of each are printed.
   Fairly: every contender starts after ``sync`` with nothing left to write back, and what the one
   before it wrote is dropped from the page cache (``posix_fadvise(DONTNEED)``) before it is
   removed, so nobody pays for another's dirty pages:

   - ``superfluid runtime install basert --mirror <server>`` into a fresh ``SUPERFLUID_HOME``
     (cold cache: listing, ABI asset, ``.sha256``, the download hashed, cached and extracted in
     one pass, every member judged, the probe in a worker, publish);
   - the minimal Python loop: ``requests`` streaming the bundle into a file through ``hashlib``,
     then ``tarfile`` extracting it (no checks at all);
   - the shell pipeline ``curl -s URL | tee FILE | sha256sum`` then ``tar xzf FILE``.

   Targets: the install at most 0.9x the minimal loop and at most 0.4x the pipeline (medians).
2. The phases of the median install, as the installer itself records them (``--timings``: start
   (interpreter, imports, command line), listing, download, extract, probe, publish).
3. The HTTP requests of a warm ``runtime install basert --dry-run`` (a second one in the same home),
   from the server's log: the listing should cost one conditional request (a 304, no body).

Run by hand (``scripts/bench``), never in CI. Bounded: every subprocess has a timeout and no round
starts after ``--budget`` seconds once the least rounds are done. Usage:
``python benchmarks/bench_install.py [--runs N] [--mb M] [--budget S] [--json]``; exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.end_to_end import releases  # noqa: E402
from tests.release_server import ReleaseServer  # noqa: E402

BIN = Path(os.environ.get("SUPERFLUID_TEST_BIN", ROOT / ".venv" / "bin"))
TARGET_MINIMAL = 0.9  # install / minimal Python loop
TARGET_PIPELINE = 0.4  # install / curl pipeline
MIN_RUNS = 7
TIMEOUT = 180.0  # seconds one contender may take

#: the minimal Python loop: download through SHA-256 into a file, then extract; no checks at all
MINIMAL = """\
import hashlib, sys, tarfile
import requests
url, dest = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
with requests.get(url, stream=True) as r, open(dest + ".tar.gz", "wb") as f:
    for chunk in r.iter_content(1 << 20):
        h.update(chunk)
        f.write(chunk)
with tarfile.open(dest + ".tar.gz") as t:
    t.extractall(dest)
print(h.hexdigest())
"""


def _python_env(work: Path) -> dict[str, str]:
    """The environment of every Python contender: byte code compiled once and then read, as an
    installed package's is (pip compiles it at install), whatever ``PYTHONDONTWRITEBYTECODE`` says."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in _python_env(home.parent).items()
           if not k.startswith(("SUPERFLUID_", "BASERT_")) and k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    env["SUPERFLUID_HOME"] = str(home)
    env["CI"] = "1"  # no progress bar
    return env


def _settle(*written: Path) -> None:
    """Leave nothing to write back: ``sync``, then drop the pages of the files in ``written`` (a
    contender's own output, before it is removed) from the page cache where the kernel allows."""
    os.sync()
    advise = getattr(os, "posix_fadvise", None)
    for top in written:
        for path in (top.rglob("*") if top.is_dir() else [top]):
            if advise is None or not path.is_file() or path.is_symlink():
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _removed(*paths: Path) -> None:
    """Each path dropped from the page cache, then removed, then the removal synced."""
    _settle(*(p for p in paths if p.exists()))
    for p in paths:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    os.sync()


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    os.sync()  # the contender starts with nothing of anyone's left to write back
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                          timeout=TIMEOUT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed, done.stdout.decode()


def _install_once(server: ReleaseServer, work: Path, i: int) -> tuple[float, list[dict[str, Any]]]:
    home = work / f"home-{i}"
    home.mkdir()
    try:
        argv = [str(BIN / "superfluid"), "runtime", "install", "basert", "--mirror", server.mirror_url,
                "--json", "--timings"]
        elapsed, out = _timed(argv, _env(home))
        return elapsed, json.loads(out).get("timings", [])
    finally:
        _removed(home)


def _minimal_once(url: str, work: Path, i: int) -> float:
    out = work / f"min-{i}"
    try:
        return _timed([str(BIN / "python"), "-c", MINIMAL, url, str(out)], _python_env(work))[0]
    finally:
        _removed(out, Path(f"{out}.tar.gz"))


def _pipeline_once(url: str, work: Path, i: int) -> float:
    out = work / f"pipe-{i}"
    out.mkdir()
    archive = out / "bundle.tar.gz"
    script = (f"set -e; curl -s {shlex.quote(url)} | tee {archive} | sha256sum >/dev/null; "
              f"mkdir {out}/x && tar xzf {archive} -C {out}/x")
    try:
        return _timed(["sh", "-c", script])[0]
    finally:
        _removed(out)


def _warm_dry_run(server: ReleaseServer, work: Path) -> list[tuple[str, int | None]]:
    home = work / "home-dry"
    home.mkdir()
    argv = [str(BIN / "superfluid"), "runtime", "install", "basert", "--mirror", server.mirror_url, "--dry-run"]
    _timed(argv, _env(home))  # cold: fills the listing and sidecar caches
    server.clear_log()
    _timed(argv, _env(home))
    return [(r.path, r.status) for r in server.log]


def measure(runs: int, mb: int, budget: float) -> dict[str, Any]:
    releases.build_engines()
    with tempfile.TemporaryDirectory(prefix="sf-bench-install-") as tmp, ReleaseServer() as server:
        work = Path(tmp)
        data = releases.bundle("0.4.0", padding=mb << 20)
        name = releases.bundle_name("0.4.0")
        server.add_release(releases.REPO, "v0.4.0", {name: data, "basert-engine-abi-1.txt": b"1\n"},
                           sha256_files=True)
        url = server.mirror_url + f"{releases.REPO}/releases/download/v0.4.0/{name}"
        install: list[tuple[float, list[dict[str, Any]]]] = []
        minimal: list[float] = []
        pipeline: list[float] = []
        contenders = [lambda i: install.append(_install_once(server, work, i)),
                      lambda i: minimal.append(_minimal_once(url, work, i)),
                      lambda i: pipeline.append(_pipeline_once(url, work, i))]
        _minimal_once(url, work, -1)  # warm: the interpreter's files, the server's pages, the byte code
        _install_once(server, work, -1)
        started = time.monotonic()
        for i in range(runs):
            if i >= MIN_RUNS and time.monotonic() - started > budget:
                break
            for k in range(len(contenders)):
                contenders[(i + k) % len(contenders)](i)
        requests = _warm_dry_run(server, work)
    walls = [w for w, _ in install]
    med_i, med_m, med_p = statistics.median(walls), statistics.median(minimal), statistics.median(pipeline)
    spread = {name: {"min": min(v), "median": statistics.median(v), "max": max(v)}
              for name, v in (("install", walls), ("minimal", minimal), ("pipeline", pipeline))}
    phases = min(install, key=lambda t: abs(t[0] - med_i))[1]
    return {"bundle_bytes": len(data), "runs": len(walls), "install_s": med_i, "minimal_s": med_m,
            "pipeline_s": med_p, "ratio_minimal": med_i / med_m, "ratio_pipeline": med_i / med_p,
            "target_minimal": TARGET_MINIMAL, "target_pipeline": TARGET_PIPELINE,
            "install_all_s": walls, "minimal_all_s": minimal, "pipeline_all_s": pipeline, "spread_s": spread,
            "phases_of_median_install": phases,
            "warm_dry_run_requests": len(requests),
            "warm_dry_run_log": [{"path": p, "status": s} for p, s in requests]}


def _report(r: dict[str, Any]) -> str:
    s = r["spread_s"]

    def row(label: str, key: str) -> str:
        return f"  {label:<37} {s[key]['min']:6.2f} {s[key]['median']:6.2f} {s[key]['max']:6.2f}"

    lines = [f"install of a {r['bundle_bytes'] / 1e6:.0f} MB bundle, {r['runs']} interleaved rounds, each contender "
             f"started after sync (seconds):",
             f"  {'':<37} {'min':>6} {'median':>6} {'max':>6}",
             row("superfluid runtime install", "install"),
             row("minimal Python loop", "minimal") + f"   install/minimal  {r['ratio_minimal']:.2f}x "
             f"(target <= {r['target_minimal']}x)",
             row("curl|tee|sha256sum + tar xzf", "pipeline") + f"   install/pipeline {r['ratio_pipeline']:.2f}x "
             f"(target <= {r['target_pipeline']}x)",
             "phases of the median install (seconds since its process started; spans may overlap):"]
    for p in r["phases_of_median_install"]:
        lines.append(f"  {p['phase']:<9} {p['start']:6.3f} .. {p['end']:6.3f}  {p['seconds']:6.3f} s")
    statuses = ", ".join(f"{e['status']} {e['path']}" for e in r["warm_dry_run_log"])
    lines.append(f"warm `runtime install basert --dry-run`: {r['warm_dry_run_requests']} HTTP request(s): {statuses}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=MIN_RUNS, help=f"rounds (default and least {MIN_RUNS})")
    ap.add_argument("--mb", type=int, default=200, help="padding in MiB (default 200: a 210 MB bundle)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds after which no round starts")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < MIN_RUNS:
        ap.error(f"--runs {args.runs}: at least {MIN_RUNS} rounds, so that a median says something")
    r = measure(args.runs, args.mb, args.budget)
    print(json.dumps(r, indent=2) if args.json else _report(r))
    ok = r["ratio_minimal"] <= TARGET_MINIMAL and r["ratio_pipeline"] <= TARGET_PIPELINE
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
